// Throttling kernels of the GPU emulation of the NMP pool.
//
// The pool's primitives run as ordinary kernels on a stream of their own. To
// make that stream take as long as the simulated pool would, a stamp kernel
// records the device's global nanosecond timer before the real work, and a
// one-thread pad kernel after the work spins until `target_ns` have passed
// since the stamp. The stream is busy for max(real work, target) and other
// streams (the MLPs) overlap with it for real.

__device__ __forceinline__ unsigned long long nmpsim_globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// slot[0] = now.
extern "C" __global__ void nmpsim_stamp(unsigned long long *slot) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        slot[0] = nmpsim_globaltimer();
    }
}

// Spins until slot[0] + target_ns; writes the time it stopped to slot[1].
extern "C" __global__ void nmpsim_pad_until(unsigned long long *slot, unsigned long long target_ns) {
    if (blockIdx.x != 0 || threadIdx.x != 0) {
        return;
    }
    const unsigned long long deadline = slot[0] + target_ns;
    unsigned long long now = nmpsim_globaltimer();
    while (now < deadline) {
        // Sleep in short steps: the timer is read often enough for
        // microsecond accuracy without keeping an SM's issue slots busy.
        unsigned long long left = deadline - now;
        __nanosleep(left > 2000ull ? 1000u : 100u);
        now = nmpsim_globaltimer();
    }
    slot[1] = now;
}
