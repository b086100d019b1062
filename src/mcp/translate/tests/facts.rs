//! The table itself: one row per place, the versions the schemas show, and docs/versions.md's copy.

use super::*;

#[test]
fn the_table_is_one_row_per_place_and_every_step_has_rows() {
    for (i, r) in TABLE.iter().enumerate() {
        assert!(r.since > V2024_11_05, "2024-11-05 is the baseline: {:?}", r.place);
        assert!(TABLE[..i].iter().all(|o| o.place != r.place), "{:?} twice", r.place);
        assert!(!r.source.is_empty());
    }
    for from in ProtocolVersion::ALL {
        for to in ProtocolVersion::ALL {
            let rows = TABLE.iter().any(|r| r.since > to && r.since <= from);
            assert_eq!(needs_downgrade(from, to), rows, "{from} → {to}");
        }
    }
    for p in [table::STRUCTURED_CONTENT, table::CREATED_TASK, table::ELICIT_TITLED_ENUM, table::SAMPLING_TOOLS] {
        assert!(table::since(p).is_some(), "{p:?} has its row");
    }
}

/// The schema facts, transcribed apart from the table from reading the schema files side by
/// side: what each version added. The table must say exactly this.
#[test]
fn versions_match_the_schemas() {
    use table::Place::*;
    let facts: &[(ProtocolVersion, &[&str])] = &[
        // schema/2025-03-26/schema.json against schema/2024-11-05/schema.json
        (
            V2025_03_26,
            &[
                "Tool.annotations",
                "content block audio",
                "ProgressNotification.params.message",
                "ServerCapabilities.completions",
            ],
        ),
        // schema/2025-06-18/schema.ts against schema/2025-03-26/schema.json
        (
            V2025_06_18,
            &[
                "Tool.title",
                "Tool.outputSchema",
                "Tool._meta",
                "CallToolResult.structuredContent",
                "content block resource_link",
                "ContentBlock._meta",
                "Annotations.lastModified",
                "Resource.title",
                "Resource._meta",
                "ResourceTemplate.title",
                "ResourceTemplate._meta",
                "ResourceContents._meta",
                "Prompt.title",
                "Prompt._meta",
                "PromptArgument.title",
                "Implementation.title",
                "Root._meta",
                "CompleteRequest.params.context",
                "PromptReference.title",
                "ClientCapabilities.elicitation",
                "request elicitation/create",
            ],
        ),
        // schema/2025-11-25/schema.ts against schema/2025-06-18/schema.ts
        (
            V2025_11_25,
            &[
                "Tool.icons",
                "Tool.execution",
                "Resource.icons",
                "ResourceTemplate.icons",
                "Prompt.icons",
                "Implementation.icons",
                "Implementation.description",
                "Implementation.websiteUrl",
                "ServerCapabilities.tasks",
                "ClientCapabilities.tasks",
                "ClientCapabilities.elicitation.form",
                "ClientCapabilities.elicitation.url",
                "ClientCapabilities.sampling.context",
                "ClientCapabilities.sampling.tools",
                "CallToolRequest.params.task",
                "CreateMessageRequest.params.task",
                "ElicitRequest.params.task",
                "CreateTaskResult.task",
                "_meta key io.modelcontextprotocol/related-task",
                "request tasks/get",
                "request tasks/result",
                "request tasks/list",
                "request tasks/cancel",
                "notification notifications/tasks/status",
                "notification notifications/elicitation/complete",
                "CancelledNotification.params.requestId absent",
                "CreateMessageRequest.params.tools",
                "CreateMessageRequest.params.toolChoice",
                "SamplingMessage._meta",
                "SamplingMessage.content as an array",
                "content block tool_use",
                "content block tool_result",
                "ElicitRequest.params.mode",
                "ElicitRequest.params.mode \"url\"",
                "ElicitRequest.params.requestedSchema.$schema",
                "PrimitiveSchemaDefinition.default on a string, number or enum",
                "PrimitiveSchemaDefinition.oneOf",
                "PrimitiveSchemaDefinition.type \"array\"",
            ],
        ),
    ];
    for &(v, added) in facts {
        let mut table: Vec<String> =
            TABLE.iter().filter(|r| r.since == v).map(|r| r.place.describe().replace('`', "")).collect();
        let mut facts: Vec<String> = added.iter().map(|s| s.to_string()).collect();
        table.sort();
        facts.sort();
        assert_eq!(table, facts, "what {v} added");
    }
    // In every version: Resource.size and annotations, ResourceTemplate.annotations,
    // embedded resources, images, Result._meta, the sampling and roots capabilities.
    for p in [
        Field(Shape::Resource, "size"),
        Field(Shape::Resource, "annotations"),
        Block("image"),
        Block("resource"),
        Capability(Shape::ClientCapabilities, &["sampling"]),
        Request(Method::SamplingCreateMessage),
        Request(Method::CompletionComplete),
    ] {
        assert_eq!(table::since(p), None, "{p:?}");
    }
}

#[test]
fn the_versions_page_holds_the_table() {
    let page = include_str!("../../../../docs/versions.md");
    let md = table::markdown();
    assert!(
        page.contains(&md),
        "docs/versions.md should hold the table as it is now (UPDATE_DOCS=1 cargo test --test all docs::)"
    );
}
