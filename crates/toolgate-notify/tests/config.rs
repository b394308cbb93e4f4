//! `[[notify]]` validation, environment lookup, defaults, `wants` and e-mail recipients.

mod common;

use std::collections::BTreeMap;

use common::{channels_with_env, parse_file};
use pretty_assertions::assert_eq;
use toolgate_notify::{
    Channels, EmailTarget, EventKind, LinkMode, NotifyConfigError, Recipient, SmtpTls, Target, WebhookFormat,
};

const EXAMPLE: &str = r#"
[emails]
bob = "bob@example.com"

[[notify]]
name = "ops-hook"
webhook = "https://hooks.example.com/toolgate"
secret_env = "OPS_HOOK_SECRET"
events = ["approval.requested", "approval.decided", "approval.escalated", "approval.expired", "approval.executed"]
format = "json"
links = "signed"

[[notify]]
name = "finance-mail"
smtp = "smtp://mail.example.com:587"
tls = "starttls"
from = "toolgate <approvals@example.com>"
to = ["approvers", "carol", "group:finance", "audit@example.com"]
events = ["approval.requested", "approval.escalated"]
"#;

fn load(toml_text: &str) -> Result<Channels, NotifyConfigError> {
    channels_with_env(toml_text, &[("HOOK_SECRET", "s3cret")])
}

fn error(toml_text: &str) -> NotifyConfigError {
    load(toml_text).expect_err("the configuration should be refused")
}

fn webhook(extra: &str) -> String {
    format!(
        "[[notify]]\nname = \"hook\"\nwebhook = \"https://hooks.example.com/x\"\nsecret_env = \"HOOK_SECRET\"\n{extra}"
    )
}

fn mail(extra: &str) -> String {
    format!(
        "[[notify]]\nname = \"mail\"\nsmtp = \"smtp://mail.example.com\"\nfrom = \"approvals@example.com\"\n{extra}"
    )
}

fn mail_to(extra: &str) -> String {
    mail(&format!("to = [\"approvers\"]\n{extra}"))
}

#[test]
fn the_documented_example_validates() {
    let channels = channels_with_env(EXAMPLE, &[("OPS_HOOK_SECRET", "hook-key")]).unwrap();
    assert_eq!(channels.channels.len(), 2);
    assert_eq!(channels.emails.get("bob").map(String::as_str), Some("bob@example.com"));

    let hook = channels.get("ops-hook").unwrap();
    assert_eq!(hook.links, LinkMode::Signed);
    assert!(!hook.is_email());
    let Target::Webhook(target) = &hook.target else { panic!("not a webhook: {hook:?}") };
    assert_eq!(target.url.as_str(), "https://hooks.example.com/toolgate");
    assert_eq!(target.format, WebhookFormat::Json);
    assert_eq!(target.secret(), Some(&b"hook-key"[..]));

    let mail = channels.get("finance-mail").unwrap();
    assert!(mail.is_email());
    let Target::Email(email) = &mail.target else { panic!("not e-mail: {mail:?}") };
    assert_eq!(
        (email.server.host.as_str(), email.server.port, email.server.tls),
        ("mail.example.com", 587, SmtpTls::StartTls)
    );
    assert_eq!(email.server.credentials(), None);
    assert_eq!(email.from.to_string(), "toolgate <approvals@example.com>");
    assert_eq!(
        email.to,
        vec![
            EmailTarget::Approvers,
            EmailTarget::Principal("carol".into()),
            EmailTarget::Group("finance".into()),
            EmailTarget::Address("audit@example.com".into()),
        ]
    );
    assert!(channels.get("nope").is_none());
}

#[test]
fn defaults() {
    let channels = load(&webhook("")).unwrap();
    let hook = &channels.channels[0];
    assert_eq!(hook.links, LinkMode::Signed);
    assert_eq!(hook.events, EventKind::ALL.into_iter().collect());
    let Target::Webhook(target) = &hook.target else { panic!() };
    assert_eq!(target.format, WebhookFormat::Json);

    let channels = load(&mail_to("")).unwrap();
    let Target::Email(email) = &channels.channels[0].target else { panic!() };
    assert_eq!((email.server.port, email.server.tls), (587, SmtpTls::StartTls));

    let smtps = mail_to("").replace("smtp://", "smtps://");
    let channels = load(&smtps).unwrap();
    let Target::Email(email) = &channels.channels[0].target else { panic!() };
    assert_eq!((email.server.port, email.server.tls), (465, SmtpTls::Implicit));

    let implicit = mail_to("tls = \"implicit\"");
    let Target::Email(email) = &channels_with_env(&implicit, &[]).unwrap().channels[0].target else { panic!() };
    assert_eq!((email.server.port, email.server.tls), (465, SmtpTls::Implicit));

    let plain = mail_to("tls = \"none\"").replace("mail.example.com", "127.0.0.1");
    let Target::Email(email) = &channels_with_env(&plain, &[]).unwrap().channels[0].target else { panic!() };
    assert_eq!((email.server.host.as_str(), email.server.port, email.server.tls), ("127.0.0.1", 25, SmtpTls::None));
}

#[test]
fn slack_webhooks_need_no_secret_and_may_use_bearer_links() {
    let toml_text =
        "[[notify]]\nname = \"chat\"\nwebhook = \"http://127.0.0.1:9/x\"\nformat = \"slack\"\nlinks = \"bearer\"\n";
    let channels = channels_with_env(toml_text, &[]).unwrap();
    let Target::Webhook(target) = &channels.channels[0].target else { panic!() };
    assert_eq!((target.format, target.secret()), (WebhookFormat::Slack, None));
    assert_eq!(channels.channels[0].links, LinkMode::Bearer);
}

#[test]
fn wants_listed_kinds_and_reminders_with_requests() {
    let channels = channels_with_env(EXAMPLE, &[("OPS_HOOK_SECRET", "k")]).unwrap();
    let hook = channels.get("ops-hook").unwrap();
    for kind in EventKind::ALL {
        // approval.reminded is not listed, but approval.requested is.
        assert!(hook.wants(kind), "{kind}");
    }
    let mail = channels.get("finance-mail").unwrap();
    let wanted: Vec<EventKind> = EventKind::ALL.into_iter().filter(|&k| mail.wants(k)).collect();
    assert_eq!(wanted, [EventKind::Requested, EventKind::Escalated, EventKind::Reminded]);

    let decided_only = load(&webhook("events = [\"approval.decided\"]")).unwrap();
    let wanted: Vec<EventKind> = EventKind::ALL.into_iter().filter(|&k| decided_only.channels[0].wants(k)).collect();
    assert_eq!(wanted, [EventKind::Decided]);
}

#[test]
fn secrets_and_credentials_come_from_the_environment() {
    let with_defaults = channels_with_env(&mail_to(""), &[("SMTP_USER", "u"), ("SMTP_PASSWORD", "p")]).unwrap();
    let Target::Email(email) = &with_defaults.channels[0].target else { panic!() };
    assert_eq!(email.server.credentials(), Some(("u", "p")));

    let named = mail_to("user_env = \"MAIL_USER\"\npassword_env = \"MAIL_PASS\"");
    let env = [("MAIL_USER", "named-user"), ("MAIL_PASS", "named-pass"), ("SMTP_USER", "x"), ("SMTP_PASSWORD", "y")];
    let Target::Email(email) = &channels_with_env(&named, &env).unwrap().channels[0].target else { panic!() };
    assert_eq!(email.server.credentials(), Some(("named-user", "named-pass")));

    // Neither the secret nor the password shows in debug output.
    let debug = format!("{with_defaults:?} {:?}", load(&webhook("")).unwrap());
    assert!(!debug.contains("s3cret") && !debug.contains("\"p\""), "{debug}");
}

#[test]
fn missing_environment_variables_are_named() {
    assert_eq!(
        channels_with_env(&webhook(""), &[]).unwrap_err(),
        NotifyConfigError::MissingEnv { channel: "hook".into(), var: "HOOK_SECRET".into() }
    );
    assert_eq!(
        channels_with_env(&webhook(""), &[("HOOK_SECRET", "")]).unwrap_err(),
        NotifyConfigError::MissingEnv { channel: "hook".into(), var: "HOOK_SECRET".into() }
    );
    let named = mail_to("user_env = \"MAIL_USER\"\npassword_env = \"MAIL_PASS\"");
    let err = channels_with_env(&named, &[("MAIL_USER", "u")]).unwrap_err();
    assert_eq!(err, NotifyConfigError::MissingEnv { channel: "mail".into(), var: "MAIL_PASS".into() });
    assert!(err.to_string().contains("MAIL_PASS") && err.to_string().contains("\"mail\""), "{err}");

    let err = channels_with_env(&mail_to(""), &[("SMTP_USER", "u")]).unwrap_err();
    assert_eq!(
        err,
        NotifyConfigError::IncompleteCredentials {
            channel: "mail".into(),
            present: "user",
            present_var: "SMTP_USER".into(),
            missing: "password",
            missing_var: "SMTP_PASSWORD".into(),
        }
    );
}

#[test]
fn names_must_be_valid_and_unique() {
    for name in ["", "has space", "ünï", "a/b"] {
        let toml_text = webhook("").replace("name = \"hook\"", &format!("name = \"{name}\""));
        assert_eq!(error(&toml_text), NotifyConfigError::InvalidName { name: name.into() });
    }
    let ok = webhook("").replace("name = \"hook\"", "name = \"Ops_hook-1.eu\"");
    assert!(load(&ok).is_ok());
    let twice = format!("{}\n{}", webhook(""), webhook(""));
    assert_eq!(error(&twice), NotifyConfigError::DuplicateName { name: "hook".into() });
}

#[test]
fn exactly_one_target() {
    assert_eq!(error("[[notify]]\nname = \"x\"\n"), NotifyConfigError::NoTarget { channel: "x".into() });
    let both = webhook("smtp = \"smtp://mail.example.com\"");
    assert_eq!(error(&both), NotifyConfigError::BothTargets { channel: "hook".into() });
}

#[test]
fn urls_are_checked() {
    for url in ["ftp://hooks.example.com/x", "not a url", "file:///etc/passwd"] {
        let toml_text = webhook("").replace("https://hooks.example.com/x", url);
        assert!(
            matches!(error(&toml_text), NotifyConfigError::InvalidUrl { channel, .. } if channel == "hook"),
            "{url}"
        );
    }
    let plain_http = webhook("").replace("https://", "http://");
    assert!(load(&plain_http).is_ok());
    for url in [
        "http://mail.example.com",
        "smtp://user:pw@mail.example.com",
        "smtp://mail.example.com/path",
        "smtp://mail.example.com?tls=none",
    ] {
        let toml_text = mail_to("").replace("smtp://mail.example.com", url);
        assert!(
            matches!(error(&toml_text), NotifyConfigError::InvalidUrl { channel, .. } if channel == "mail"),
            "{url}"
        );
    }
}

#[test]
fn unknown_values_are_refused() {
    assert_eq!(
        error(&webhook("events = [\"approval.requested\", \"approval.approved\"]")),
        NotifyConfigError::UnknownEvent { channel: "hook".into(), event: "approval.approved".into() }
    );
    assert_eq!(error(&webhook("events = []")), NotifyConfigError::EmptyEvents { channel: "hook".into() });
    assert_eq!(
        error(&webhook("format = \"xml\"")),
        NotifyConfigError::UnknownFormat { channel: "hook".into(), format: "xml".into() }
    );
    assert_eq!(
        error(&webhook("links = \"magic\"")),
        NotifyConfigError::UnknownLinks { channel: "hook".into(), links: "magic".into() }
    );
    assert!(matches!(error(&mail_to("tls = \"ssl\"")), NotifyConfigError::InvalidTls { tls, .. } if tls == "ssl"));
    let contradiction = mail_to("tls = \"starttls\"").replace("smtp://", "smtps://");
    assert!(matches!(error(&contradiction), NotifyConfigError::InvalidTls { .. }));
    // Unknown keys are refused when the file is read.
    let typo = webhook("secret_evn = \"X\"");
    assert!(toml::from_str::<common::File>(&typo).is_err());
}

#[test]
fn keys_of_the_other_kind_of_channel_are_refused() {
    for (extra, field) in [("tls = \"none\"", "tls"), ("from = \"a@b.c\"", "from"), ("to = [\"approvers\"]", "to")] {
        assert_eq!(
            error(&webhook(extra)),
            NotifyConfigError::NotApplicable { channel: "hook".into(), field, target: "webhook" }
        );
    }
    for (extra, field) in [("format = \"json\"", "format"), ("secret_env = \"HOOK_SECRET\"", "secret_env")] {
        assert_eq!(
            error(&mail_to(extra)),
            NotifyConfigError::NotApplicable { channel: "mail".into(), field, target: "smtp" }
        );
    }
}

#[test]
fn json_webhooks_need_a_secret() {
    let toml_text = "[[notify]]\nname = \"h\"\nwebhook = \"https://hooks.example.com/x\"\n";
    assert_eq!(error(toml_text), NotifyConfigError::MissingSecret { channel: "h".into() });
}

#[test]
fn email_links_are_always_signed() {
    assert_eq!(error(&mail_to("links = \"bearer\"")), NotifyConfigError::BearerLinksOnEmail { channel: "mail".into() });
    assert!(load(&mail_to("links = \"signed\"")).is_ok());
}

#[test]
fn plain_text_smtp_only_to_loopback() {
    for host in ["127.0.0.1", "127.1.2.3", "[::1]", "localhost", "LOCALHOST"] {
        let toml_text = mail_to("tls = \"none\"").replace("mail.example.com", host);
        assert!(load(&toml_text).is_ok(), "{host}");
    }
    for host in ["mail.example.com", "10.0.0.1", "[2001:db8::1]", "localhost.example.com"] {
        let toml_text = mail_to("tls = \"none\"").replace("mail.example.com", host);
        let err = error(&toml_text);
        assert!(matches!(&err, NotifyConfigError::PlaintextSmtp { channel, .. } if channel == "mail"), "{host}: {err}");
    }
}

#[test]
fn senders_and_recipients_are_checked() {
    let no_from = "[[notify]]\nname = \"mail\"\nsmtp = \"smtp://mail.example.com\"\nto = [\"approvers\"]\n";
    assert_eq!(error(no_from), NotifyConfigError::MissingFrom { channel: "mail".into() });
    let bad_from = mail_to("").replace("from = \"approvals@example.com\"", "from = \"not an address\"");
    assert!(matches!(error(&bad_from), NotifyConfigError::InvalidFrom { from, .. } if from == "not an address"));
    assert_eq!(error(&mail("")), NotifyConfigError::EmptyTo { channel: "mail".into() });
    assert_eq!(error(&mail("to = []")), NotifyConfigError::EmptyTo { channel: "mail".into() });
    for entry in ["bad@@address", "group:", ""] {
        let err = error(&mail(&format!("to = [\"approvers\", \"{entry}\"]")));
        assert!(matches!(&err, NotifyConfigError::InvalidRecipient { entry: e, .. } if e == entry), "{entry}: {err}");
    }
    let bad_mapping = format!("[emails]\nbob = \"bob-at-example\"\n{}", mail_to(""));
    assert!(
        matches!(error(&bad_mapping), NotifyConfigError::InvalidEmailMapping { principal, .. } if principal == "bob")
    );
}

#[test]
fn errors_name_the_channel() {
    let err = error(&webhook("format = \"xml\""));
    assert_eq!(err.to_string(), "notify channel \"hook\": unknown format \"xml\" (use \"json\" or \"slack\")");
}

#[test]
fn recipients_resolve_dedupe_and_report_unmapped_principals() {
    let toml_text = "[emails]\nbob = \"bob@example.com\"\ncarol = \"Carol@Example.com\"\n\
        [[notify]]\nname = \"m\"\nsmtp = \"smtp://mail.example.com\"\nfrom = \"a@example.com\"\n\
        to = [\"approvers\", \"group:finance\", \"group:nobody\", \"carol\", \"carol@example.com\", \"ops@example.com\", \"zed\"]\n";
    let file = parse_file(toml_text);
    let channels = Channels::from_config(&file.notify, &file.emails, |_| None).unwrap();
    let Target::Email(email) = &channels.channels[0].target else { panic!() };
    let groups = BTreeMap::from([(
        "finance".to_owned(),
        vec!["carol".to_owned(), "dave".to_owned(), "eve@example.com".to_owned()],
    )]);
    let approvers = vec!["bob".to_owned(), "bob".to_owned(), "frank".to_owned()];
    let recipients = email.recipients(&approvers, &groups, &channels.emails);
    let to: Vec<(Option<&str>, &str)> =
        recipients.to.iter().map(|r: &Recipient| (r.principal.as_deref(), r.address.as_str())).collect();
    assert_eq!(
        to,
        [
            (Some("bob"), "bob@example.com"),
            (Some("carol"), "Carol@Example.com"),
            (Some("eve@example.com"), "eve@example.com"),
            (None, "ops@example.com"),
        ]
    );
    assert_eq!(recipients.unmapped, ["frank", "dave", "group:nobody", "zed"]);
}
