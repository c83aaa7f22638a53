//! Typed launchers, one family per CUDA source file.
//!
//! Each kernel has one `unsafe fn …_async` taking typed device views and
//! returning [`crate::Error::LaunchShape`] on bad lengths; its `# Safety`
//! states what it cannot check (stream ordering, aliasing, the PTX ABI).
//! The safe wrappers beside them launch on the buffers' own stream, which is
//! what makes them sound: a buffer's memory is allocated and freed in that
//! stream's order.

pub mod bench;
pub mod ckks;
pub mod touch;

use std::ffi::c_void;
use std::marker::PhantomData;

use cudarc::driver::sys::{
    CUlaunchAttribute, CUlaunchAttributeID, CUlaunchAttributeValue, CUlaunchConfig,
};
use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr, DriverError, LaunchConfig, result};
use hemem_memory::StreamId;

use crate::Kernels;

/// One launch of a CKKS kernel: its arguments, by reference, then
/// [`Launch::launch`]. Where the kernels were loaded with programmatic
/// dependent launch ([`Kernels::dependent_launch`]) it launches with
/// `cuLaunchKernelEx` and the programmatic-serialization attribute, so that
/// its blocks may be scheduled during the previous kernel's last wave (each
/// CKKS kernel waits for its predecessors in `grid_dependency_sync`,
/// `cuda/ckks_common.cuh`, before it touches memory); otherwise with
/// `cuLaunchKernel`, as cudarc's builder does. Arguments are plain values
/// (device addresses, maps, counts), so no buffer events are recorded.
pub(crate) struct Launch<'a> {
    stream: &'a CudaStream,
    function: &'a CudaFunction,
    dependent: bool,
    args: Vec<*mut c_void>,
    /// The arguments are borrowed for `'a`: the pointers in `args` stay
    /// valid until the launch is made.
    values: PhantomData<&'a ()>,
}

impl<'a> Launch<'a> {
    /// A launch of `function` on `stream` of the kernels' device.
    pub(crate) fn new(kernels: &'a Kernels, stream: StreamId, function: &'a CudaFunction) -> Self {
        Self {
            stream: kernels.device.stream(stream),
            function,
            dependent: kernels.dependent,
            args: Vec::with_capacity(16),
            values: PhantomData,
        }
    }

    /// Appends the next kernel argument (its type must be the PTX
    /// parameter's).
    pub(crate) fn arg<T: DeviceRepr>(&mut self, value: &'a T) -> &mut Self {
        self.args.push(std::ptr::from_ref(value).cast_mut().cast());
        self
    }

    /// Queues the kernel.
    ///
    /// # Errors
    /// The driver's launch error.
    ///
    /// # Safety
    /// The arguments must be the kernel's parameters in order and type, and
    /// every address among them usable by the kernel on this stream until
    /// it completes (the caller's `# Safety`).
    pub(crate) unsafe fn launch(&mut self, cfg: LaunchConfig) -> Result<(), DriverError> {
        self.stream.context().bind_to_thread()?;
        if !self.dependent {
            // SAFETY: the function is loaded in the stream's context; the
            // arguments are the caller's contract.
            return unsafe {
                result::launch_kernel(
                    self.function.cu_function(),
                    cfg.grid_dim,
                    cfg.block_dim,
                    cfg.shared_mem_bytes,
                    self.stream.cu_stream(),
                    &mut self.args,
                )
            };
        }
        let mut attribute = CUlaunchAttribute {
            id: CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value: CUlaunchAttributeValue {
                programmaticStreamSerializationAllowed: 1,
            },
        };
        let config = CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &raw mut attribute,
            numAttrs: 1,
        };
        // SAFETY: as above; `config` and its one attribute outlive the call,
        // and the kernel (sm_90 PTX) waits for its predecessors before it
        // touches memory, which is what the attribute requires to keep the
        // stream's order.
        unsafe {
            cudarc::driver::sys::cuLaunchKernelEx(
                &raw const config,
                self.function.cu_function(),
                self.args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
    }
}

/// Threads per block of the element-wise kernels.
const BLOCK: u32 = 256;
/// Most blocks of a grid-stride launch.
const MAX_BLOCKS: u64 = 4096;

/// A one-dimensional grid-stride launch over `items` items.
fn grid_stride(items: u64, block: u32) -> LaunchConfig {
    let blocks = items.div_ceil(u64::from(block)).clamp(1, MAX_BLOCKS);
    LaunchConfig {
        grid_dim: (u32::try_from(blocks).unwrap_or(1), 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_are_bounded() {
        assert_eq!(grid_stride(0, BLOCK).grid_dim, (1, 1, 1));
        assert_eq!(grid_stride(257, BLOCK).grid_dim, (2, 1, 1));
        assert_eq!(grid_stride(1 << 40, BLOCK).grid_dim, (4096, 1, 1));
    }
}
