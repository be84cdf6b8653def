//! The JSON Schema of the results the faces return (feature `schema`),
//! derived from their one definition, the views of view.rs: what the MCP
//! server builds its tools' output schemas from (the addon's
//! `resultSchemas()`), keyed by the name index.d.ts gives each result.

use crate::present::view::{
    CheckView, CorruptJobView, JobResultView, JobView, KillView, LogReadView, OrphanReportView, PauseView, SendView, StartView,
    SummaryView,
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
}
