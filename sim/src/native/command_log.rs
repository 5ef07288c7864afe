//! The command log: recording each issued command, and handing the log to a
//! sink a block at a time.

use crate::jedec::{Command, CommandRecord};

use super::NativeEngine;

/// Where [`NativeEngine::with_command_sink`] hands the log.
pub(super) type CommandSink = Box<dyn FnMut(&[CommandRecord]) + Send>;

impl NativeEngine {
    /// Hands the log to the sink, if there is one, and empties it.
    #[cold]
    #[inline(never)]
    pub(super) fn flush_log(&mut self) {
        if let (Some(log), Some(sink)) = (self.log.as_mut(), self.log_sink.as_mut()) {
            sink(log);
            log.clear();
        }
    }

    #[inline(always)]
    pub(super) fn log_cmd(&mut self, cycle: u64, q: usize, command: Command) {
        if self.log.is_some() {
            self.log_push(cycle, q, command);
        }
    }

    #[cold]
    #[inline(never)]
    fn log_push(&mut self, cycle: u64, q: usize, command: Command) {
        if let Some(log) = self.log.as_mut() {
            log.push(CommandRecord {
                cycle,
                rank: (q / self.banks_per_rank) as u32,
                command,
                bank: (q % self.banks_per_rank) as u32,
            });
            if log.len() >= self.log_flush_at {
                self.flush_log();
            }
        }
    }
}
