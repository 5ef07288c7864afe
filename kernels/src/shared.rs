//! [`SharedMut`]: one mutable array written by many tasks at once, each at
//! places no other task writes. The kernels that need it (the radix sort's
//! scatter, the optimizer's row updates) say at each write why the places
//! are disjoint.

use std::marker::PhantomData;

/// A mutable array shared by parallel tasks that write disjoint elements.
#[derive(Clone, Copy)]
pub(crate) struct SharedMut<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: a `SharedMut` only hands out writes through `unsafe` methods whose
// callers guarantee that no two tasks touch one element; `T: Send` moves the
// values between threads.
unsafe impl<T: Send> Send for SharedMut<'_, T> {}
unsafe impl<T: Send> Sync for SharedMut<'_, T> {}

impl<'a, T> SharedMut<'a, T> {
    /// Shares `data` (mutably borrowed for as long as the wrapper lives).
    pub(crate) fn new(data: &'a mut [T]) -> Self {
        SharedMut {
            ptr: data.as_mut_ptr(),
            len: data.len(),
            _borrow: PhantomData,
        }
    }

    /// Element `i`'s address (a method, so closures capture the `Sync`
    /// wrapper rather than its raw pointer field).
    pub(crate) fn at(&self, i: usize) -> *mut T {
        debug_assert!(i < self.len);
        self.ptr.wrapping_add(i)
    }

    /// Elements `start..start + len`.
    ///
    /// # Safety
    /// The range must lie inside the array, and no other reference to any of
    /// its elements may live while the returned one does.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slice(&self, start: usize, len: usize) -> &mut [T] {
        debug_assert!(start + len <= self.len);
        // SAFETY: as the caller promises.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }

    /// The address of element `i`, which may be past the end: for hints such
    /// as a prefetch that read nothing.
    pub(crate) fn hint_at(&self, i: usize) -> *const T {
        self.ptr.wrapping_add(i)
    }
}
