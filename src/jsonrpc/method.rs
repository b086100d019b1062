//! Every MCP method, of every version the gateway speaks (2024-11-05 to 2026-07-28, and the
//! task proposals it bridges), named once: the enum, its wire names, its parse and the lists
//! derived from it ([`Method::ALL`], the requests a client sends) all come from the one table
//! in [`methods!`]. A name no version defines is [`Method::Other`]: the gateway forwards it
//! by the name in the message, untouched.

/// Declares [`Method`] from one list of `Variant => "wire/name"` pairs, each with its doc.
macro_rules! methods {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// An MCP method. Which versions define it is the translation table's knowledge
        /// (`mcp::translate::table`); here every method is named once.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Method {
            $($(#[$doc])* $variant,)*
            /// Anything else: passed through by name.
            Other,
        }

        impl Method {
            /// Every named method, in the order of their declaration ([`Method::Other`] aside).
            pub const ALL: [Method; [$(Method::$variant),*].len()] = [$(Method::$variant),*];

            /// The method named `name`; [`Method::Other`] for a name no version defines.
            pub fn parse(name: &str) -> Method {
                // Matching on the string compiles to a length switch then compares: no table scan.
                match name {
                    $($name => Method::$variant,)*
                    _ => Method::Other,
                }
            }

            /// The name on the wire; `None` for [`Method::Other`], whose name only the message knows.
            pub const fn name(self) -> Option<&'static str> {
                match self {
                    $(Method::$variant => Some($name),)*
                    Method::Other => None,
                }
            }
        }
    };
}

methods! {
    // Lifecycle and utilities (2024-11-05).
    Initialize => "initialize",
    Ping => "ping",
    Initialized => "notifications/initialized",
    Cancelled => "notifications/cancelled",
    Progress => "notifications/progress",
    /// 2026-07-28's discovery request, the modern era's first call.
    ServerDiscover => "server/discover",
    // Tools.
    ToolsList => "tools/list",
    ToolsCall => "tools/call",
    ToolsListChanged => "notifications/tools/list_changed",
    // Resources.
    ResourcesList => "resources/list",
    ResourcesTemplatesList => "resources/templates/list",
    ResourcesRead => "resources/read",
    ResourcesSubscribe => "resources/subscribe",
    ResourcesUnsubscribe => "resources/unsubscribe",
    ResourcesListChanged => "notifications/resources/list_changed",
    ResourcesUpdated => "notifications/resources/updated",
    // Prompts and completion.
    PromptsList => "prompts/list",
    PromptsGet => "prompts/get",
    PromptsListChanged => "notifications/prompts/list_changed",
    CompletionComplete => "completion/complete",
    // Logging.
    LoggingSetLevel => "logging/setLevel",
    LogMessage => "notifications/message",
    // Requests a server sends its client.
    SamplingCreateMessage => "sampling/createMessage",
    /// 2025-06-18.
    ElicitationCreate => "elicitation/create",
    /// 2025-11-25: a URL-mode elicitation finished.
    ElicitationComplete => "notifications/elicitation/complete",
    RootsList => "roots/list",
    RootsListChanged => "notifications/roots/list_changed",
    // Tasks: 2025-11-25's core tasks, and the 2026-07-28 tasks extension (SEP-2663).
    TasksGet => "tasks/get",
    TasksResult => "tasks/result",
    TasksList => "tasks/list",
    TasksCancel => "tasks/cancel",
    /// SEP-2663: input for a task that asked for it.
    TasksUpdate => "tasks/update",
    TaskStatus => "notifications/tasks/status",
    /// SEP-2663's task notification, sent on a `subscriptions/listen` stream.
    TasksNotification => "notifications/tasks",
    // 2026-07-28 subscriptions.
    SubscriptionsListen => "subscriptions/listen",
    SubscriptionsAcknowledged => "notifications/subscriptions/acknowledged",
    /// The progress-state proposal's `progress/get`.
    ProgressGet => "progress/get",
    /// SEP-1391's `tools/async/status`.
    ToolsAsyncStatus => "tools/async/status",
    /// SEP-1391's `tools/async/result`.
    ToolsAsyncResult => "tools/async/result",
}

impl Method {
    /// The name on the wire of a known method.
    ///
    /// # Panics
    /// On [`Method::Other`], which has no name of its own: a programming error.
    pub const fn as_str(self) -> &'static str {
        match self.name() {
            Some(n) => n,
            None => panic!("Method::Other has no name of its own"),
        }
    }

    /// A notification (its name is under `notifications/`).
    pub const fn is_notification(self) -> bool {
        matches!(
            self,
            Method::Initialized
                | Method::Cancelled
                | Method::Progress
                | Method::ToolsListChanged
                | Method::ResourcesListChanged
                | Method::ResourcesUpdated
                | Method::PromptsListChanged
                | Method::LogMessage
                | Method::ElicitationComplete
                | Method::RootsListChanged
                | Method::TaskStatus
                | Method::TasksNotification
                | Method::SubscriptionsAcknowledged
        )
    }

    /// A request a client sends its server, in some version: the requests the gateway
    /// counts by name (`ping` goes both ways, and counts here).
    pub const fn is_client_request(self) -> bool {
        !self.is_notification() && !self.is_input_request() && !matches!(self, Method::Other)
    }

    /// A `tasks/*` request the 2025-11-25 task vocabulary defines.
    pub const fn is_task_request(self) -> bool {
        matches!(self, Method::TasksGet | Method::TasksResult | Method::TasksList | Method::TasksCancel)
    }

    /// A request a server sends its client asking for input (2025-11-25 `input_required`).
    pub const fn is_input_request(self) -> bool {
        matches!(self, Method::ElicitationCreate | Method::SamplingCreateMessage | Method::RootsList)
    }

    /// The position of `self` in [`Method::ALL`]; [`Method::ALL`]'s length for
    /// [`Method::Other`] (declared last).
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name().unwrap_or("(another method)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_method() {
        for m in Method::ALL {
            assert_eq!(Method::parse(m.as_str()), m, "{m:?}");
            assert_eq!(Method::ALL[m.index()], m);
            assert_eq!(m.is_notification(), m.as_str().starts_with("notifications/"), "{m:?}");
        }
        assert_eq!(Method::Other.name(), None);
        assert_eq!(Method::Other.index(), Method::ALL.len());
    }

    #[test]
    fn unknown_and_near_names_are_other() {
        for n in ["", "tools/Call", "tools/call ", "notifications/tasks/", "resources/sub", "x"] {
            assert_eq!(Method::parse(n), Method::Other, "{n:?}");
        }
    }

    #[test]
    fn client_requests_are_the_23_a_client_sends() {
        let n = Method::ALL.iter().filter(|m| m.is_client_request()).count();
        assert_eq!(n, 23);
        assert!(Method::Ping.is_client_request() && !Method::RootsList.is_client_request());
    }
}
