//! The JSON Schema of the results the faces return (feature `schema`),
//! derived from their one definition, the views of view.rs: what the MCP
//! server builds its tools' output schemas from (the addon's
//! `resultSchemas()`), keyed by the name index.d.ts gives each result.

use crate::present::view::{
    CheckView, CorruptJobView, JobResultView, JobView, KillView, LogReadView, OrphanReportView, PauseView, PhaseView, ProcessInfoView,
    ReconcileView, SendView, SnapshotView, StackDownView, StackUpView, StartView, StreamLineView, SummaryView, YieldView,
};

/// Every result the MCP tools answer from, by its index.d.ts name (`Summary`:
/// the CLI's, whose lines the JS `summary()` joins).
pub fn schema() -> serde_json::Value {
    serde_json::json!({
        "RunResult": of::<StartView>(),
        "CheckResult": of::<CheckView>(),
        "LogRead": of::<LogReadView>(),
        "JobSummary": of::<JobView>(),
        "CorruptJob": of::<CorruptJobView>(),
        "JobResult": of::<JobResultView>(),
        "KillResult": of::<KillView>(),
        "PauseResult": of::<PauseView>(),
        "SendResult": of::<SendView>(),
        "CleanupReport": of::<OrphanReportView>(),
        // `run-bg summary --json`; `summary()` joins its lines.
        "Summary": of::<SummaryView>(),
    })
}

/// Every result the JS API returns, each under its index.d.ts name (the
/// `rename` of its view), the results nested in it referenced (`$ref`) rather
/// than inlined, properties in their declaration order (schemars'
/// `preserve_order`): what scripts/options-dts.mjs writes index.d.ts's
/// result interfaces from. `x-ts` names a string union's TypeScript type,
/// `x-ts-extends` the result a view flattens in first.
pub fn typescript() -> serde_json::Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12().for_serialize().into_generator();
    // The roots: each result a function returns; what they hold comes along.
    generator.subschema_for::<StartView>();
    generator.subschema_for::<YieldView>();
    generator.subschema_for::<CheckView>();
    generator.subschema_for::<CorruptJobView>();
    generator.subschema_for::<JobResultView>();
    generator.subschema_for::<KillView>();
    generator.subschema_for::<PauseView>();
    generator.subschema_for::<SendView>();
    generator.subschema_for::<LogReadView>();
    generator.subschema_for::<StreamLineView>();
    generator.subschema_for::<ReconcileView>();
    generator.subschema_for::<OrphanReportView>();
    generator.subschema_for::<SnapshotView>();
    generator.subschema_for::<PhaseView>();
    generator.subschema_for::<ProcessInfoView>();
    generator.subschema_for::<StackUpView>();
    generator.subschema_for::<StackDownView>();
    // `watchJobs`' items: the exit notification's `data`.
    generator.subschema_for::<crate::supervise::notify::JobEnd>();
    let mut definitions = serde_json::Value::Object(generator.take_definitions(true));
    crate::verbs::start_options::without_null(&mut definitions);
    definitions
}

/// One result as it is serialized: a field skipped when empty is not
/// `required`, and never `null` (the views leave a field out instead);
/// nested views inlined, so that each schema stands alone.
fn of<T: schemars::JsonSchema>() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    crate::verbs::start_options::without_null(&mut schema);
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_described_as_serialized() {
        let results = schema();
        let check = &results["CheckResult"];
        // Flattened: the job's fields beside the check's own.
        assert_eq!(check["properties"]["jobId"]["type"], "string");
        assert_eq!(check["properties"]["exitCode"]["type"], "integer");
        assert_eq!(check["properties"]["cursor"]["type"], "integer");
        let required: Vec<&str> = check["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        for field in ["jobId", "status", "cursor", "tail", "lingering"] {
            assert!(required.contains(&field), "{field} is always there: {required:?}");
        }
        // Left out when it has no value: neither required nor `null`.
        assert!(!required.contains(&"exitCode"), "{required:?}");
        assert!(!check.to_string().contains("\"null\""), "{check}");
        let report = &results["CleanupReport"]["properties"];
        assert_eq!(report["orphanedJobs"]["items"]["properties"]["jobId"]["type"], "string");
        assert_eq!(report["killed"]["items"]["properties"]["pid"]["type"], "integer");
    }

    #[test]
    fn typescript_names_each_result_and_keeps_declaration_order() {
        let types = typescript();
        let job = &types["JobSummary"];
        let order: Vec<&String> = job["properties"].as_object().unwrap().keys().collect();
        // The view's order (jobId, label, command, status, …), not the alphabet's.
        assert_eq!(order[..4], ["jobId", "label", "command", "status"]);
        assert_eq!(job["properties"]["status"]["x-ts"], "JobStatus");
        assert_eq!(job["properties"]["status"]["enum"][0], "running");
        // Nested results by reference, under their index.d.ts names.
        assert_eq!(types["CleanupReport"]["properties"]["orphanedJobs"]["items"]["$ref"], "#/$defs/JobSummary");
        assert_eq!(types["CheckResult"]["x-ts-extends"], "JobSummary");
        for name in ["RunResult", "YieldResult", "KillResult", "StackKillResult", "PhaseResult", "JobEnd", "JobLogLine", "ProcessSnapshot"] {
            assert_eq!(types[name]["type"], "object", "{name}");
        }
        assert!(!types.to_string().contains("View\""), "no Rust view name leaks: {types}");
    }
}
