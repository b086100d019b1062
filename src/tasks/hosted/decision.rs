//! The hosting decision: which tools the gateway runs as tasks of its own (per
//! `[upstream.tasks] hosted`), given what the upstream runs itself.

use crate::config::HostedMode;
use crate::mcp::task_messages::TaskSupport;

/// The hosting decision, given whether the upstream declares tasks and the tool's own
/// support. A tool the upstream requires as a task is the upstream's to run; `auto` hosts
/// what the upstream would not run as a task: a forbidden tool, or any tool of an upstream
/// that declares no tasks (marking a tool in its listing does not make a server accept
/// task-augmented calls of it).
pub fn hosts(mode: HostedMode, upstream_declares_tasks: bool, support: TaskSupport) -> bool {
    match mode {
        HostedMode::Never => false,
        HostedMode::Always => support != TaskSupport::Required,
        HostedMode::Auto if upstream_declares_tasks => support == TaskSupport::Forbidden,
        HostedMode::Auto => support != TaskSupport::Required,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosting_decisions() {
        use TaskSupport::*;
        // An upstream without tasks: every tool is hosted (unless never).
        assert!(hosts(HostedMode::Auto, false, Forbidden));
        assert!(!hosts(HostedMode::Never, false, Forbidden));
        // A task-capable upstream: auto hosts only what it would refuse as a task.
        assert!(hosts(HostedMode::Auto, true, Forbidden));
        assert!(!hosts(HostedMode::Auto, true, Optional));
        assert!(!hosts(HostedMode::Auto, true, Required));
        assert!(hosts(HostedMode::Always, true, Optional));
        assert!(!hosts(HostedMode::Always, true, Required));
        // A server that marks tools without declaring tasks: what it requires is its own.
        assert!(hosts(HostedMode::Auto, false, Optional));
        assert!(!hosts(HostedMode::Auto, false, Required));
    }
}
