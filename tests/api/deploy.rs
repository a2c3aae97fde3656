//! The reconcile CronJob of `deploy/reconcile-cronjob.yaml`, its shell
//! script run as the job's container runs it (`sh -c`, curl), against the
//! served API instead of the cluster's Service: it walks every user of each
//! tenant, following `next_cursor`, and a refused call fails the job.

use std::process::Command;

use crate::store::{Kind, MessageStore};
use crate::support::{ADMIN_TOKEN, App, Setup};

/// The job's script (the block under `args: - |`), with the Service's
/// address replaced by `base`.
fn job_script(base: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/reconcile-cronjob.yaml");
    let yaml = std::fs::read_to_string(path).unwrap();
    let mut lines = yaml.lines().skip_while(|line| line.trim() != "- |").skip(1);
    let first = lines.next().expect("the job's script");
    let indent = first.len() - first.trim_start().len();
    let script: Vec<&str> = std::iter::once(first)
        .chain(lines.take_while(|line| line.trim().is_empty() || line.len() - line.trim_start().len() >= indent))
        .map(|line| line.get(indent..).unwrap_or(""))
        .collect();
    let script = script.join("\n");
    assert!(script.contains("http://unread-reconcile/v1/admin/reconcile"), "{script}");
    script.replace("http://unread-reconcile", base)
}

/// Runs the job's script with the container's environment.
async fn run_job(base: &str, token: &str, tenants: &str) -> (bool, String, String) {
    let mut command = Command::new("sh");
    command.args(["-c", &job_script(base)]).env("ADMIN_TOKEN", token).env("TENANTS", tenants);
    let output = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.success(), text(&output.stdout), text(&output.stderr))
}

#[tokio::test]
async fn the_reconcile_cronjob_walks_every_user_and_fails_on_a_refusal() {
    let store = MessageStore::create(Kind::Postgres).await;
    let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
    // More members than one walk step takes (200), each with a message
    // Redis never heard of: every one of them has drifted.
    let members: Vec<String> = (0..250).map(|n| format!("u{n:03}")).collect();
    store.create_conversation("acme", "c1", "chat", &members).await;
    store.store_message("acme", "c1", 1, 1_000, "nobody", "{}").await;
    store.create_conversation("beta", "c1", "chat", &members[..3]).await;

    let (ok, stdout, stderr) = run_job(app.base(), ADMIN_TOKEN, "acme beta").await;
    assert!(ok, "the job failed:\n{stdout}\n{stderr}");
    let answers: Vec<(&str, serde_json::Value)> = stdout
        .lines()
        .map(|line| {
            let (tenant, answer) = line.split_once(": ").unwrap();
            (tenant, serde_json::from_str(answer).unwrap())
        })
        .collect();
    let checked = |tenant: &str| -> u64 {
        answers.iter().filter(|(t, _)| *t == tenant).map(|(_, a)| a["checked"].as_u64().unwrap()).sum()
    };
    assert_eq!((checked("acme"), checked("beta")), (250, 3), "{stdout}");
    assert_eq!(answers.iter().filter(|(t, _)| *t == "acme").count(), 2, "two walk steps: {stdout}");
    let fixed: u64 = answers.iter().map(|(_, a)| a["fixed"].as_u64().unwrap()).sum();
    assert_eq!(fixed, 250, "{stdout}");
    assert_eq!(app.badge("acme", "u123").await.body["total"], 1);

    let (ok, stdout, _) = run_job(app.base(), "not-the-admin-token", "acme").await;
    assert!(!ok, "a refused call must fail the job: {stdout}");
    drop(app);
    store.drop_database().await;
}
