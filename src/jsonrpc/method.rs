//! The methods the gateway acts on, named once. Every other method is [`Method::Other`]: the
//! gateway forwards it by the name in the message, untouched.

/// A method the gateway routes, answers or rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    Initialize,
    Ping,
    ServerDiscover,
    ToolsList,
    ToolsCall,
    TasksGet,
    TasksResult,
    TasksList,
    TasksCancel,
    ElicitationCreate,
    SamplingCreateMessage,
    RootsList,
    LoggingSetLevel,
    Initialized,
    Cancelled,
    Progress,
    TaskStatus,
    ToolsListChanged,
    ResourcesListChanged,
    PromptsListChanged,
    ResourcesUpdated,
    ResourcesSubscribe,
    ResourcesUnsubscribe,
    LogMessage,
    /// The progress-state proposal's `progress/get`.
    ProgressGet,
    /// SEP-1391's `tools/async/status`.
    ToolsAsyncStatus,
    /// SEP-1391's `tools/async/result`.
    ToolsAsyncResult,
    /// Anything else: passed through by name.
    Other,
}

/// Each known method and its name on the wire.
const NAMES: [(Method, &str); 27] = [
    (Method::Initialize, "initialize"),
    (Method::Ping, "ping"),
    (Method::ServerDiscover, "server/discover"),
    (Method::ToolsList, "tools/list"),
    (Method::ToolsCall, "tools/call"),
    (Method::TasksGet, "tasks/get"),
    (Method::TasksResult, "tasks/result"),
    (Method::TasksList, "tasks/list"),
    (Method::TasksCancel, "tasks/cancel"),
    (Method::ElicitationCreate, "elicitation/create"),
    (Method::SamplingCreateMessage, "sampling/createMessage"),
    (Method::RootsList, "roots/list"),
    (Method::LoggingSetLevel, "logging/setLevel"),
    (Method::Initialized, "notifications/initialized"),
    (Method::Cancelled, "notifications/cancelled"),
    (Method::Progress, "notifications/progress"),
    (Method::TaskStatus, "notifications/tasks/status"),
    (Method::ToolsListChanged, "notifications/tools/list_changed"),
    (Method::ResourcesListChanged, "notifications/resources/list_changed"),
    (Method::PromptsListChanged, "notifications/prompts/list_changed"),
    (Method::ResourcesUpdated, "notifications/resources/updated"),
    (Method::ResourcesSubscribe, "resources/subscribe"),
    (Method::ResourcesUnsubscribe, "resources/unsubscribe"),
    (Method::LogMessage, "notifications/message"),
    (Method::ProgressGet, "progress/get"),
    (Method::ToolsAsyncStatus, "tools/async/status"),
    (Method::ToolsAsyncResult, "tools/async/result"),
];

impl Method {
    /// The method named `name`; [`Method::Other`] for one the gateway does not act on.
    pub fn parse(name: &str) -> Method {
        // Matching on the string compiles to a length switch then compares: no table scan.
        match name {
            "initialize" => Method::Initialize,
            "ping" => Method::Ping,
            "server/discover" => Method::ServerDiscover,
            "tools/list" => Method::ToolsList,
            "tools/call" => Method::ToolsCall,
            "tasks/get" => Method::TasksGet,
            "tasks/result" => Method::TasksResult,
            "tasks/list" => Method::TasksList,
            "tasks/cancel" => Method::TasksCancel,
            "elicitation/create" => Method::ElicitationCreate,
            "sampling/createMessage" => Method::SamplingCreateMessage,
            "roots/list" => Method::RootsList,
            "logging/setLevel" => Method::LoggingSetLevel,
            "notifications/initialized" => Method::Initialized,
            "notifications/cancelled" => Method::Cancelled,
            "notifications/progress" => Method::Progress,
            "notifications/tasks/status" => Method::TaskStatus,
            "notifications/tools/list_changed" => Method::ToolsListChanged,
            "notifications/resources/list_changed" => Method::ResourcesListChanged,
            "notifications/prompts/list_changed" => Method::PromptsListChanged,
            "notifications/resources/updated" => Method::ResourcesUpdated,
            "resources/subscribe" => Method::ResourcesSubscribe,
            "resources/unsubscribe" => Method::ResourcesUnsubscribe,
            "notifications/message" => Method::LogMessage,
            "progress/get" => Method::ProgressGet,
            "tools/async/status" => Method::ToolsAsyncStatus,
            "tools/async/result" => Method::ToolsAsyncResult,
            _ => Method::Other,
        }
    }

    /// The name on the wire; `None` for [`Method::Other`], whose name only the message knows.
    pub fn name(self) -> Option<&'static str> {
        NAMES.iter().find(|(m, _)| *m == self).map(|(_, n)| *n)
    }

    /// The name on the wire of a known method.
    ///
    /// # Panics
    /// On [`Method::Other`], which has no name of its own: a programming error.
    pub fn as_str(self) -> &'static str {
        self.name().expect("Method::Other has no name of its own")
    }

    /// A `tasks/*` request the 2025-11-25 task vocabulary defines.
    pub fn is_task_request(self) -> bool {
        matches!(self, Method::TasksGet | Method::TasksResult | Method::TasksList | Method::TasksCancel)
    }

    /// A request a server sends its client asking for input (2025-11-25 `input_required`).
    pub fn is_input_request(self) -> bool {
        matches!(self, Method::ElicitationCreate | Method::SamplingCreateMessage | Method::RootsList)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_method() {
        for (m, n) in NAMES {
            assert_eq!(Method::parse(n), m, "{n}");
            assert_eq!(m.as_str(), n);
        }
        assert_eq!(Method::Other.name(), None);
    }

    #[test]
    fn unknown_and_near_names_are_other() {
        for n in ["", "tools/Call", "tools/call ", "notifications/tasks/", "resources/read", "x"] {
            assert_eq!(Method::parse(n), Method::Other, "{n:?}");
        }
    }
}
