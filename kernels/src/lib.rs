//! placeholder replaced by the kernels implementation
