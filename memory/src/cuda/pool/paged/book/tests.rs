//! The page book against the mock driver.

use super::Book;
use super::mock::{Call, MockPages};
use crate::StreamId::{Compute, Copy};

fn book(cap: u64, va: u64, handle: u64) -> Book<MockPages> {
    Book::new(MockPages::default(), 1, cap, va, handle)
}

/// The failure the driver's pool had: free room in pieces, none long
/// enough. Here the pieces are remapped into one block, after one wait
/// for the latest of their frees.
#[test]
fn free_pages_in_pieces_back_a_block_as_long_as_all_of_them() {
    let mut b = book(8, 32, 4);
    let blocks: Vec<u64> = (0..8)
        .map(|_| b.allocate(1, Compute).expect("driver").expect("room"))
        .collect();
    assert_eq!(b.held_bytes(), 8);
    assert_eq!(b.allocate(1, Compute).expect("driver"), None, "at the cap");
    // Free every other page: 4 pages free, no two adjacent.
    for &p in blocks.iter().step_by(2) {
        assert!(b.free(p, Compute).expect("driver"));
    }
    b.driver().take();
    let big = b.allocate(4, Compute).expect("driver").expect("remapped");
    let calls = b.driver().take();
    let unmaps = calls.iter().filter(|c| matches!(c, Call::Unmap(_))).count();
    let maps = calls
        .iter()
        .filter(|c| matches!(c, Call::Map { .. }))
        .count();
    assert_eq!((unmaps, maps), (4, 4));
    assert!(calls.contains(&Call::Grant(big, 4)));
    assert!(!calls.iter().any(|c| matches!(c, Call::Create(_))));
    // The frees are not known complete: the host waits once, for the
    // latest of the four, before unmapping.
    let syncs = calls
        .iter()
        .filter(|c| matches!(c, Call::Synchronize(_)))
        .count();
    assert_eq!(syncs, 1, "{calls:?}");
    assert_eq!(b.held_bytes(), 8, "never above the cap");
    assert_eq!(b.live_bytes(), 8);
    assert_eq!(b.allocate(1, Compute).expect("driver"), None);
}

/// Cached runs are reused in stream order: a run of the requesting
/// stream at once, one of the other stream once its frees are complete;
/// while they are not, fresh pages go first, and only at the cap does
/// the requesting stream wait on the other's free.
#[test]
fn cached_blocks_are_reused_in_stream_order() {
    let mut b = book(4, 64, 4);
    let alloc = |b: &mut Book<MockPages>, n, s| b.allocate(n, s).expect("driver").expect("room");
    let a = alloc(&mut b, 3, Compute);
    assert!(b.free(a, Compute).expect("driver"));
    b.driver().take();
    let same = alloc(&mut b, 2, Compute);
    assert_eq!(same, a);
    assert!(b.driver().take().is_empty(), "own stream: no call");
    let other = alloc(&mut b, 1, Copy);
    let calls = b.driver().take();
    assert!(calls.contains(&Call::Create(1)), "{calls:?}");
    assert!(calls.iter().any(|c| matches!(c, Call::Record(Compute, _))));
    assert!(!calls.iter().any(|c| matches!(c, Call::Wait(..))));
    assert_eq!(other, a + 3, "a fresh page, not the compute stream's");
    let x = alloc(&mut b, 1, Copy);
    assert_eq!(x, a + 2, "at the cap: the compute stream's page");
    // The copy stream waits on the mark recorded on the compute stream
    // when the run was asked about.
    let calls = b.driver().take();
    assert!(
        matches!(calls.as_slice(), [Call::Wait(Copy, _)]),
        "{calls:?}"
    );
    b.driver().events_done.set(true);
    assert!(b.free(x, Copy).expect("driver"));
    assert!(b.free(other, Copy).expect("driver"));
    b.driver().take();
    let y = alloc(&mut b, 2, Compute);
    assert_eq!(y, a + 2, "the copy stream's run, its frees complete");
    let calls = b.driver().take();
    assert!(
        matches!(calls.as_slice(), [Call::Record(Copy, _)]),
        "a mark to ask about, no wait, no new page: {calls:?}"
    );
    assert!(b.free(y, Compute).expect("driver"));
    assert!(b.free(same, Compute).expect("driver"));
    b.driver().take();
    assert_eq!(alloc(&mut b, 4, Compute), a, "runs freed apart merge");
    assert!(b.driver().take().is_empty());
    assert!(!b.free(a + 1, Copy).expect("driver"), "not a block's start");
}

/// A block longer than any cached run grows a cached run into the
/// unmapped addresses after it: one page mapped, not three.
#[test]
fn a_cached_run_is_extended_in_place() {
    let mut b = book(4, 16, 1);
    b.driver().events_done.set(true);
    let alloc = |b: &mut Book<MockPages>, n| b.allocate(n, Compute).expect("driver").expect("room");
    let (x, y) = (alloc(&mut b, 2), alloc(&mut b, 2));
    assert!(b.free(x, Compute).expect("driver"));
    assert!(b.free(y, Compute).expect("driver"));
    let (c, d) = (alloc(&mut b, 1), alloc(&mut b, 1));
    assert_eq!((c, d), (0, 1));
    assert!(b.free(c, Compute).expect("driver"));
    b.driver().take();
    // Cached: page 0 and pages 2..4; pages 4.. unmapped.
    let e = alloc(&mut b, 3);
    assert_eq!(e, 2, "pages 2..4 and the unmapped page 4");
    let calls = b.driver().take();
    let unmaps: Vec<&Call> = calls
        .iter()
        .filter(|c| matches!(c, Call::Unmap(_)))
        .collect();
    let maps = calls
        .iter()
        .filter(|c| matches!(c, Call::Map { .. }))
        .count();
    assert_eq!(unmaps, vec![&Call::Unmap(0)], "{calls:?}");
    assert_eq!(maps, 1, "{calls:?}");
    assert!(calls.contains(&Call::Grant(4, 1)), "{calls:?}");
    assert_eq!(b.held_bytes(), 4);
}

/// A trim gives back whole physical allocations none of whose pages is
/// live, after their frees complete; pages mapped nowhere go first.
#[test]
fn a_trim_releases_allocations_with_no_live_page() {
    let mut b = book(16, 64, 4);
    let x = b.allocate(4, Compute).expect("driver").expect("room");
    let y = b.allocate(4, Compute).expect("driver").expect("room");
    assert_eq!(b.held_bytes(), 8);
    assert!(b.free(x, Compute).expect("driver"));
    b.driver().take();
    assert_eq!(b.trim_to(0).expect("driver"), 4, "y's allocation stays");
    let calls = b.driver().take();
    assert_eq!(
        calls.get(..2),
        Some(&[Call::Record(Compute, 2), Call::Synchronize(2)][..]),
        "one mark after x's free, waited for once"
    );
    assert_eq!(
        calls.iter().filter(|c| matches!(c, Call::Unmap(_))).count(),
        4
    );
    assert_eq!(calls.last(), Some(&Call::Release(0)));
    assert_eq!(b.cached_pages(), 0);
    assert!(b.free(y, Compute).expect("driver"));
    assert_eq!(b.trim_to(4).expect("driver"), 4, "already at 4");
    assert_eq!(b.trim_to(0).expect("driver"), 0);
    assert_eq!(b.high_bytes(), 8);
}

/// When the device itself has no room, cached pages are remapped; when
/// there are none, the request is refused (no error).
#[test]
fn a_full_device_remaps_cached_pages_then_refuses() {
    let mut b = book(64, 256, 8);
    b.driver().device_room.set(Some(6));
    b.driver().events_done.set(true);
    let a = b.allocate(4, Compute).expect("driver").expect("room");
    let c = b.allocate(2, Compute).expect("driver").expect("room");
    assert!(b.free(a, Compute).expect("driver"));
    let d = b.allocate(3, Compute).expect("driver").expect("cached");
    assert_eq!(d, a, "best fit among cached runs");
    let e = b.allocate(2, Compute).expect("driver");
    assert_eq!(e, None, "one cached page, no device room");
    assert!(b.free(c, Compute).expect("driver"));
    let e = b.allocate(3, Compute).expect("driver").expect("extended");
    assert_eq!(e, c, "c's pages and one remapped after them");
    assert_eq!(b.held_bytes(), 6);
    b.teardown().expect("driver");
    assert_eq!(b.held_bytes(), 0);
}
