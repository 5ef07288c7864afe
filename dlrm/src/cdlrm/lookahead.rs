//! The look-ahead of cDLRM's prefetcher: the training input read a window
//! of `n` batches at a time, one window ahead of the batch being trained,
//! and shared with the strategy, which installs a window when its first
//! batch trains and prefetches the next one then.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use nmpsim_traces::Batch;

use crate::DlrmError;
use crate::trainer::{DataSource, IterRecord};

/// A window of batches, each with the epoch the input had reached when it
/// was read.
pub(crate) struct Window {
    pub(crate) batches: Vec<Batch>,
    epochs: Vec<u64>,
}

/// What the input has read ahead, for the strategy.
#[derive(Default)]
pub(crate) struct Ahead {
    /// The batch handed out last starts a window: that window, and the
    /// next one when the input has one.
    pub(crate) starts: Option<(Arc<Window>, Option<Arc<Window>>)>,
}

pub(crate) type SharedAhead = Arc<Mutex<Ahead>>;

/// The training input, read one window ahead.
pub(crate) struct LookAhead {
    inner: Box<dyn DataSource>,
    n: usize,
    /// Windows read and not yet handed out whole.
    windows: VecDeque<Arc<Window>>,
    /// Position in the front window of the next batch to hand out.
    next: usize,
    ended: bool,
    epoch: u64,
    shared: SharedAhead,
}

impl LookAhead {
    pub(crate) fn new(inner: Box<dyn DataSource>, n: usize, shared: SharedAhead) -> Self {
        LookAhead {
            inner,
            n,
            windows: VecDeque::new(),
            next: 0,
            ended: false,
            epoch: 0,
            shared,
        }
    }

    /// Reads windows until two are held or the input ends.
    fn fill(&mut self) -> Result<(), DlrmError> {
        while self.windows.len() < 2 && !self.ended {
            let mut w = Window {
                batches: Vec::with_capacity(self.n),
                epochs: Vec::with_capacity(self.n),
            };
            while w.batches.len() < self.n {
                match self.inner.next_batch() {
                    Some(b) => {
                        w.batches.push(b?);
                        w.epochs.push(self.inner.epoch());
                    }
                    None => {
                        self.ended = true;
                        break;
                    }
                }
            }
            if !w.batches.is_empty() {
                self.windows.push_back(Arc::new(w));
            }
        }
        Ok(())
    }
}

impl DataSource for LookAhead {
    fn next_batch(&mut self) -> Option<Result<Batch, DlrmError>> {
        if self
            .windows
            .front()
            .is_some_and(|w| self.next == w.batches.len())
        {
            self.windows.pop_front();
            self.next = 0;
        }
        if let Err(e) = self.fill() {
            return Some(Err(e));
        }
        let w = self.windows.front()?.clone();
        if self.next == 0 {
            let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
            s.starts = Some((w.clone(), self.windows.get(1).cloned()));
        }
        let b = w.batches.get(self.next)?.clone();
        self.epoch = w.epochs[self.next];
        self.next += 1;
        Some(Ok(b))
    }

    fn epoch(&self) -> u64 {
        self.epoch
    }

    fn after_step(&mut self, rec: &IterRecord) -> bool {
        self.inner.after_step(rec)
    }

    fn schedule_loss(&mut self, test_loss: Option<f64>) {
        self.inner.schedule_loss(test_loss)
    }
}
