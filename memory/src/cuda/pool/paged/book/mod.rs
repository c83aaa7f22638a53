//! The page book of the paged pool: which physical pages back which pages
//! of the reserved address range, which blocks are live, and which freed
//! pages wait for their stream.
//!
//! Each page of the range is mapped on its own (`cuMemMap` cannot unmap
//! part of a mapping), so any freed page can back any new block: a request
//! the budget has room for never fails for want of a contiguous hole, the
//! failure the driver's pool showed under a hard cap (FVb at 2 GiB refused a
//! 36.7 MB block with 0.7 GB free in pieces; docs/GPU-PERF.md, thirteenth
//! session). PyTorch's "expandable segments" and GPUswap's page-granular
//! remapping of device memory rest on the same driver calls.
//!
//! Freed blocks stay mapped ("cached", apart by the stream that freed them)
//! and are handed out again first. A request takes, in order: a cached run
//! of its own stream (reused in stream order, no wait); one of the other
//! stream whose frees are complete; a shorter cached run of its own stream
//! grown into the unmapped addresses beside it (only the pages it lacks
//! mapped); fresh pages (spare physical pages, then new ones while the pool
//! is under its cap); a cached run of the other stream, the taking stream
//! waiting on the marks recorded after the frees (as the driver's pool
//! follows event dependencies); last, pages unmapped from cached runs and
//! mapped afresh, completed frees first, then the oldest, the host waiting
//! at most once per stream. The order keeps the compute stream from waiting
//! on copies queued ahead of it, and the host from waiting on the device,
//! wherever other room exists.
//!
//! The book calls the driver through [`PageDriver`], so its logic is tested
//! on the CPU against a mock.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

mod marks;

use self::marks::Lane;
use super::runs::Runs;
use crate::{PoolActivity, Result, StreamId};

/// The driver calls the book makes. Addresses are byte offsets into the
/// pool's reserved range.
pub(super) trait PageDriver {
    /// A physical allocation (`CUmemGenericAllocationHandle`).
    type Handle: Copy;
    /// A recorded point of a stream's work.
    type Event;

    /// Creates `bytes` of physical device memory; `Ok(None)` when the
    /// device has no room for it.
    fn create(&self, bytes: u64) -> Result<Option<Self::Handle>>;
    /// Releases a physical allocation none of whose pages is mapped.
    fn release(&self, handle: Self::Handle) -> Result<()>;
    /// Maps `bytes` of `handle` from `offset` at `va`.
    fn map(&self, va: u64, handle: Self::Handle, offset: u64, bytes: u64) -> Result<()>;
    /// Makes the mapped range `[va, va + bytes)` readable and writable by
    /// the device.
    fn grant(&self, va: u64, bytes: u64) -> Result<()>;
    /// Unmaps one mapping `[va, va + bytes)`.
    fn unmap(&self, va: u64, bytes: u64) -> Result<()>;
    /// Records the work queued so far on `stream`.
    fn record(&self, stream: StreamId) -> Result<Self::Event>;
    /// Whether the recorded work is done.
    fn is_complete(&self, event: &Self::Event) -> Result<bool>;
    /// Waits on the host for the recorded work.
    fn synchronize(&self, event: &Self::Event) -> Result<()>;
    /// Makes `stream` wait for the recorded work.
    fn wait(&self, stream: StreamId, event: &Self::Event) -> Result<()>;
}

/// A free awaited: (the lane of its stream, its number there).
type Free = (usize, u64);

/// A page of the reserved range.
#[derive(Default)]
struct Page {
    /// The physical page mapped here: (handle id, page within the handle).
    phys: Option<(u32, u32)>,
    /// Part of a live block.
    live: bool,
    /// The free this page waits for before another stream or the host may
    /// reuse it: (its stream's lane, the free's number on that stream).
    pending: Option<Free>,
}

/// A physical allocation: where each of its pages is mapped.
struct Held<H> {
    raw: H,
    at: Vec<Option<u64>>,
}

/// The book. Page counts are in pages of `page` bytes.
pub(super) struct Book<D: PageDriver> {
    driver: D,
    page: u64,
    /// The most pages held from the device.
    cap: u64,
    /// The most pages a new physical allocation gets (what a trim can give
    /// back at once).
    handle_pages: u64,
    pages: Vec<Page>,
    /// Frees and marks per stream ([`lane`]).
    lanes: [Lane<D::Event>; 2],
    handles: BTreeMap<u32, Held<D::Handle>>,
    next_handle: u32,
    /// Physical pages mapped nowhere.
    spare: BTreeSet<(u32, u32)>,
    /// Mapped pages of no live block, by the stream that freed them
    /// ([`lane`]).
    cached: [Runs; 2],
    /// Unmapped pages of no live block.
    empty: Runs,
    /// Live blocks: first page → pages.
    live: HashMap<u64, u64>,
    held: u64,
    high: u64,
    activity: PoolActivity,
}

impl<D: PageDriver> Book<D> {
    /// A book of `va_pages` pages of `page` bytes, holding at most `cap`
    /// pages, in physical allocations of at most `handle_pages`.
    pub(super) fn new(driver: D, page: u64, cap: u64, va_pages: u64, handle_pages: u64) -> Self {
        let mut empty = Runs::default();
        empty.insert(0, va_pages);
        Self {
            driver,
            page,
            cap,
            handle_pages: handle_pages.max(1),
            pages: (0..va_pages).map(|_| Page::default()).collect(),
            lanes: [Lane::default(), Lane::default()],
            handles: BTreeMap::new(),
            next_handle: 0,
            spare: BTreeSet::new(),
            cached: [Runs::default(), Runs::default()],
            empty,
            live: HashMap::new(),
            held: 0,
            high: 0,
            activity: PoolActivity::default(),
        }
    }

    /// What the book has done so far.
    pub(super) fn activity(&self) -> PoolActivity {
        self.activity
    }

    /// Adds host time spent in the pool.
    pub(super) fn add_host_ns(&mut self, ns: u64) {
        self.activity.host_ns += ns;
    }

    /// The driver.
    #[cfg(test)]
    pub(super) fn driver(&self) -> &D {
        &self.driver
    }

    /// Bytes held from the device (live, cached and spare pages).
    pub(super) fn held_bytes(&self) -> u64 {
        self.held * self.page
    }

    /// The most bytes held at once.
    pub(super) fn high_bytes(&self) -> u64 {
        self.high * self.page
    }

    /// Bytes of live blocks.
    #[cfg(test)]
    pub(super) fn live_bytes(&self) -> u64 {
        self.live.values().sum::<u64>() * self.page
    }

    fn page_mut(&mut self, page: u64) -> Option<&mut Page> {
        self.pages.get_mut(usize::try_from(page).ok()?)
    }

    /// A block of `count` pages ordered on `stream`: its first page, or
    /// `None` when the cap (or the device) leaves no room.
    ///
    /// # Errors
    /// Driver errors.
    pub(super) fn allocate(&mut self, count: u64, stream: StreamId) -> Result<Option<u64>> {
        if count == 0 || count > self.cap {
            return Ok(None);
        }
        let (own, other) = (lane(stream), 1 - lane(stream));
        if let Some(start) = self.cached_run(own, count, true)? {
            return self.take_cached(own, start, count, stream);
        }
        if let Some(start) = self.cached_run(other, count, false)? {
            return self.take_cached(other, start, count, stream);
        }
        if let Some(start) = self.extend(own, count, stream)? {
            return Ok(Some(start));
        }
        self.grow(count)?;
        if self.spare_pages() < count
            && let Some(start) = self.cached_run(other, count, true)?
        {
            return self.take_cached(other, start, count, stream);
        }
        if self.spare_pages() < count {
            let short = count - self.spare_pages();
            self.reclaim(short)?;
        }
        if self.spare_pages() < count {
            return Ok(None);
        }
        let Some(start) = self.empty.best_fit(count) else {
            return Ok(None);
        };
        self.empty.remove(start, count);
        self.back(start, count)?;
        self.take(start, count, stream)?;
        Ok(Some(start))
    }

    /// A block of `count` pages made of a shorter cached run of `lane` and
    /// the unmapped addresses right after (or before) it: only the pages it
    /// lacks are mapped, instead of the whole block at a fresh address (at
    /// the cap each mapped page is one the host may wait for). The longest
    /// such run is taken; `None` when there is none, or no physical pages
    /// for the rest.
    fn extend(&mut self, lane: usize, count: u64, stream: StreamId) -> Result<Option<u64>> {
        let runs = self
            .cached
            .get(lane)
            .map(Runs::shortest_first)
            .unwrap_or_default();
        let mut best: Option<(u64, u64, u64, u64)> = None;
        for (s, m) in runs {
            let Some(k) = count.checked_sub(m).filter(|&k| k > 0) else {
                continue;
            };
            let after = self.empty.starting_at(s + m).is_some_and(|len| len >= k);
            let before = s >= k && self.empty.ending_at(s).is_some_and(|(_, len)| len >= k);
            let place = if after {
                Some((s, s + m))
            } else if before {
                Some((s - k, s - k))
            } else {
                None
            };
            if let Some((block, ext)) = place
                && best.is_none_or(|(longest, ..)| m > longest)
            {
                best = Some((m, s, block, ext));
            }
        }
        let Some((m, s, block, ext)) = best else {
            return Ok(None);
        };
        let k = count - m;
        // Out of the reclaim's reach while the rest is gathered.
        if let Some(runs) = self.cached.get_mut(lane) {
            runs.remove(s, m);
        }
        self.grow(k)?;
        if self.spare_pages() < k {
            let short = k - self.spare_pages();
            self.reclaim(short)?;
        }
        if self.spare_pages() < k || !self.empty.remove(ext, k) {
            if let Some(runs) = self.cached.get_mut(lane) {
                runs.insert(s, m);
            }
            return Ok(None);
        }
        self.back(ext, k)?;
        self.take(block, count, stream)?;
        Ok(Some(block))
    }

    /// The best-fitting cached run of `lane` for `count` pages; unless
    /// `waiting`, only one whose frees are complete (a run of the
    /// requesting stream's own lane is taken with `waiting`: its order
    /// needs no event).
    fn cached_run(&mut self, lane: usize, count: u64, waiting: bool) -> Result<Option<u64>> {
        let Some(start) = self.cached.get(lane).and_then(|r| r.best_fit(count)) else {
            return Ok(None);
        };
        if waiting {
            return Ok(Some(start));
        }
        let last = self.last_free(start, count, lane);
        Ok(self.is_done(lane, last)?.then_some(start))
    }

    /// The latest free on `lane` that pages `[start, start + count)` wait
    /// for (0: none).
    fn last_free(&self, start: u64, count: u64, lane: usize) -> u64 {
        (start..start + count)
            .filter_map(|p| self.pages.get(p as usize).and_then(|page| page.pending))
            .filter(|&(l, _)| l == lane)
            .map(|(_, n)| n)
            .max()
            .unwrap_or(0)
    }

    fn take_cached(
        &mut self,
        lane: usize,
        start: u64,
        count: u64,
        stream: StreamId,
    ) -> Result<Option<u64>> {
        if let Some(runs) = self.cached.get_mut(lane) {
            runs.remove(start, count);
        }
        self.take(start, count, stream)?;
        Ok(Some(start))
    }

    /// Marks `[start, start + count)` live for `stream`, which waits for
    /// the frees of the other stream its pages still wait for.
    fn take(&mut self, start: u64, count: u64, stream: StreamId) -> Result<()> {
        let other = 1 - lane(stream);
        let last = self.last_free(start, count, other);
        for p in start..start + count {
            if let Some(page) = self.page_mut(p) {
                page.live = true;
                page.pending = None;
            }
        }
        if last > 0 && !self.is_done(other, last)? {
            let (_, mark) = self.mark_after(other, last)?;
            self.driver.wait(stream, &mark)?;
            self.activity.stream_waits += 1;
        }
        self.live.insert(start, count);
        Ok(())
    }

    /// Creates physical pages, while under the cap and the device has
    /// room, until `count` are spare.
    fn grow(&mut self, count: u64) -> Result<()> {
        while self.spare_pages() < count && self.held < self.cap {
            let want = (count - self.spare_pages())
                .min(self.cap - self.held)
                .min(self.handle_pages);
            let started = Instant::now();
            let created = self.driver.create(want * self.page)?;
            self.activity.mapping_ns += nanos_since(started);
            let Some(raw) = created else {
                break;
            };
            let id = self.next_handle;
            self.next_handle += 1;
            let pages = u32::try_from(want).unwrap_or(u32::MAX);
            for k in 0..pages {
                self.spare.insert((id, k));
            }
            self.handles.insert(
                id,
                Held {
                    raw,
                    at: vec![None; pages as usize],
                },
            );
            self.held += want;
            self.high = self.high.max(self.held);
            self.activity.pages_created += want;
        }
        Ok(())
    }

    fn spare_pages(&self) -> u64 {
        self.spare.len() as u64
    }

    /// Unmaps `count` cached pages (or all there are), making their
    /// physical pages spare: pages whose frees are known complete first,
    /// then the oldest frees, so that the host waits at most once per
    /// stream, for the earliest point that frees enough.
    fn reclaim(&mut self, count: u64) -> Result<()> {
        for lane in 0..self.lanes.len() {
            self.refresh(lane)?;
        }
        let mut candidates: Vec<(bool, u64, usize, u64)> = Vec::new();
        for (lane, runs) in self.cached.iter().enumerate() {
            for (start, len) in runs.shortest_first() {
                for p in start..start + len {
                    let n = self
                        .pages
                        .get(p as usize)
                        .and_then(|page| page.pending)
                        .map_or(0, |(_, n)| n);
                    let done = self.lanes.get(lane).is_none_or(|l| l.known_done(n));
                    candidates.push((!done, n, lane, p));
                }
            }
        }
        candidates.sort_unstable();
        candidates.truncate(usize::try_from(count).unwrap_or(usize::MAX));
        let mut latest = [0u64; 2];
        for &(_, n, lane, _) in &candidates {
            if let Some(l) = latest.get_mut(lane) {
                *l = (*l).max(n);
            }
        }
        for (lane, n) in latest.into_iter().enumerate() {
            if n > 0 {
                self.wait_host(lane, n)?;
            }
        }
        for (_, _, lane, p) in candidates {
            if let Some(runs) = self.cached.get_mut(lane) {
                runs.remove(p, 1);
            }
            self.unmap(p, 1)?;
            self.empty.insert(p, 1);
        }
        Ok(())
    }

    /// Unmaps the pages `[start, start + count)` (of no live block), after
    /// their frees complete; their physical pages become spare.
    fn unmap(&mut self, start: u64, count: u64) -> Result<()> {
        for p in start..start + count {
            let Some(page) = self.page_mut(p) else {
                continue;
            };
            let pending = page.pending.take();
            let phys = page.phys.take();
            if let Some((lane, n)) = pending {
                self.wait_host(lane, n)?;
            }
            if let Some((h, k)) = phys {
                let started = Instant::now();
                self.driver.unmap(p * self.page, self.page)?;
                self.activity.mapping_ns += nanos_since(started);
                self.activity.pages_unmapped += 1;
                if let Some(slot) = self
                    .handles
                    .get_mut(&h)
                    .and_then(|held| held.at.get_mut(k as usize))
                {
                    *slot = None;
                }
                self.spare.insert((h, k));
            }
        }
        Ok(())
    }

    /// Maps spare physical pages at `[start, start + count)` (there are
    /// enough) and grants the device access to them.
    fn back(&mut self, start: u64, count: u64) -> Result<()> {
        let started = Instant::now();
        let backed = self.map_spare(start, count);
        self.activity.mapping_ns += nanos_since(started);
        backed
    }

    fn map_spare(&mut self, start: u64, count: u64) -> Result<()> {
        let wanted = usize::try_from(count).unwrap_or(usize::MAX);
        let chosen: Vec<(u32, u32)> = self.spare.iter().take(wanted).copied().collect();
        for (p, (h, k)) in (start..start + count).zip(chosen) {
            self.spare.remove(&(h, k));
            let Some(held) = self.handles.get_mut(&h) else {
                continue;
            };
            self.driver
                .map(p * self.page, held.raw, u64::from(k) * self.page, self.page)?;
            self.activity.pages_mapped += 1;
            if let Some(slot) = held.at.get_mut(k as usize) {
                *slot = Some(p);
            }
            if let Some(page) = self.page_mut(p) {
                page.phys = Some((h, k));
            }
        }
        self.driver.grant(start * self.page, count * self.page)
    }

    /// Frees the block starting at page `start`, ordered on `stream`: its
    /// pages stay mapped, cached for reuse. `false` when no block starts
    /// there.
    ///
    /// # Errors
    /// Driver errors of recording a mark (the block is freed all the same;
    /// an error of the stream's earlier work shows in every later call).
    pub(super) fn free(&mut self, start: u64, stream: StreamId) -> Result<bool> {
        let Some(count) = self.live.remove(&start) else {
            return Ok(false);
        };
        let lane = lane(stream);
        let Some(l) = self.lanes.get_mut(lane) else {
            return Ok(false);
        };
        let (n, due) = l.count_free();
        for p in start..start + count {
            if let Some(page) = self.page_mut(p) {
                page.live = false;
                page.pending = Some((lane, n));
            }
        }
        if let Some(runs) = self.cached.get_mut(lane) {
            runs.insert(start, count);
        }
        if due {
            self.mark(lane)?;
        }
        Ok(true)
    }

    /// Gives physical allocations back to the device until at most `keep`
    /// bytes are held: first those mapped nowhere, then those whose pages
    /// are all cached (unmapped after their frees complete), fewest mapped
    /// pages first. Returns the bytes held after.
    ///
    /// # Errors
    /// Driver errors.
    pub(super) fn trim_to(&mut self, keep: u64) -> Result<u64> {
        let keep = keep / self.page;
        let mut order: Vec<(usize, u32)> = self
            .handles
            .iter()
            .map(|(&id, held)| (held.at.iter().flatten().count(), id))
            .collect();
        order.sort_unstable();
        for (_, id) in order {
            if self.held <= keep {
                break;
            }
            let Some(held) = self.handles.get(&id) else {
                continue;
            };
            let mapped: Vec<u64> = held.at.iter().flatten().copied().collect();
            let busy = mapped
                .iter()
                .any(|&p| self.pages.get(p as usize).is_none_or(|page| page.live));
            if busy {
                continue;
            }
            for p in mapped {
                for runs in &mut self.cached {
                    runs.remove(p, 1);
                }
                self.unmap(p, 1)?;
                self.empty.insert(p, 1);
            }
            if let Some(held) = self.handles.remove(&id) {
                let pages = held.at.len() as u64;
                self.spare.retain(|&(h, _)| h != id);
                self.held -= pages;
                self.activity.pages_released += pages;
                self.driver.release(held.raw)?;
            }
        }
        Ok(self.held_bytes())
    }

    /// Unmaps and releases everything (the pool is dropped; the device has
    /// finished with it). Returns the first driver error.
    pub(super) fn teardown(&mut self) -> Result<()> {
        let mut first = Ok(());
        let handles = std::mem::take(&mut self.handles);
        for (_, held) in handles {
            for p in held.at.iter().flatten() {
                let unmapped = self.driver.unmap(p * self.page, self.page);
                if first.is_ok() {
                    first = unmapped;
                }
            }
            let released = self.driver.release(held.raw);
            if first.is_ok() {
                first = released;
            }
        }
        self.spare.clear();
        self.held = 0;
        first
    }

    /// Pages in cached runs.
    #[cfg(test)]
    pub(super) fn cached_pages(&self) -> u64 {
        self.cached.iter().map(Runs::pages).sum()
    }
}

/// Nanoseconds since `start`.
pub(super) fn nanos_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The index of `stream`'s cached runs and frees.
fn lane(stream: StreamId) -> usize {
    match stream {
        StreamId::Compute => 0,
        StreamId::Copy => 1,
    }
}

/// The stream of lane `lane`.
fn stream_of(lane: usize) -> StreamId {
    if lane == 0 {
        StreamId::Compute
    } else {
        StreamId::Copy
    }
}

#[cfg(test)]
pub(super) mod mock;
#[cfg(test)]
mod tests;
