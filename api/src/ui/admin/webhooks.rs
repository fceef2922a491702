//! Webhooks: the subscriptions, a form to create or change one, "send a test event", and each
//! one's delivery log (newest first, a page at a time).

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::admin::webhooks::{self as service, WebhookBody, WebhookView};
use packyard_core::services::Services;
use packyard_core::webhooks::EVENTS;
use serde::Deserialize;

use super::super::{at, count};
use super::*;

/// The form's fields; events arrive as `event=<name>`, once per box ticked.
#[derive(Deserialize, Default, Clone)]
pub struct WebhookForm {
    csrf: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    repository: String,
    #[serde(default)]
    secret: String,
    enabled: Option<String>,
    batch: Option<String>,
    #[serde(default)]
    content_selector: String,
    #[serde(default, rename = "event")]
    events: Vec<String>,
}

impl WebhookForm {
    fn of(v: &WebhookView) -> Self {
        Self {
            csrf: None,
            name: v.name.clone(),
            url: v.url.clone(),
            repository: v.repository.clone().unwrap_or_default(),
            secret: String::new(),
            enabled: v.enabled.then(|| "on".into()),
            batch: v.batch.then(|| "on".into()),
            content_selector: v.content_selector.clone().unwrap_or_default(),
            events: v.events.clone(),
        }
    }

    fn body(&self, creating: bool) -> WebhookBody {
        WebhookBody {
            name: creating.then(|| self.name.trim().to_string()),
            url: self.url.trim().to_string(),
            events: self.events.clone(),
            repository: Some(self.repository.trim().to_string()).filter(|r| !r.is_empty()),
            secret: Some(self.secret.clone()).filter(|s| !s.is_empty()),
            enabled: self.enabled.is_some(),
            batch: self.batch.is_some(),
            content_selector: Some(self.content_selector.trim().to_string()).filter(|s| !s.is_empty()),
        }
    }
}

/// Events come as repeated `event=` fields, which a plain form decoder does not gather.
fn form_of(raw: &[u8]) -> WebhookForm {
    let mut f = WebhookForm::default();
    for (k, v) in url::form_urlencoded::parse(raw) {
        let v = v.into_owned();
        match k.as_ref() {
            "csrf" => f.csrf = Some(v),
            "name" => f.name = v,
            "url" => f.url = v,
            "repository" => f.repository = v,
            "secret" => f.secret = v,
            "enabled" => f.enabled = Some(v),
            "batch" => f.batch = Some(v),
            "content_selector" => f.content_selector = v,
            "event" => f.events.push(v),
            _ => {}
        }
    }
    f
}

async fn fields(services: &Services, f: &WebhookForm, creating: bool) -> Result<maud::Markup, UiError> {
    let repos = services.db.list_repositories().await?;
    Ok(html! {
        @if creating {
            (field("name", "Name", &f.name, "letters, digits, '.', '_' and '-'"))
        }
        (field("url", "Receiver URL", &f.url, "http:// or https://; deliveries are POSTs signed in X-Packyard-Signature-256"))
        fieldset {
            legend { "Events" }
            @for e in EVENTS {
                div.field { label { input type="checkbox" name="event" value=(e) checked[f.events.iter().any(|x| x == e)]; " " code { (e) } } }
            }
        }
        div.field {
            label for="repository" { "Repository" }
            select #repository name="repository" {
                option value="" selected[f.repository.is_empty()] { "every repository" }
                @for r in &repos {
                    option value=(r.name.as_str()) selected[f.repository == r.name.as_str()] { (r.name.as_str()) " (" (r.format.as_str()) ")" }
                }
            }
        }
        div.field {
            label for="secret" { "Secret" }
            input #secret name="secret" type="password" autocomplete="new-password" aria-describedby="secret-hint";
            span.hint #secret-hint {
                @if creating { "16 to 1024 characters; left empty, one is generated and shown once" }
                @else { "empty keeps the current one; it is never shown again" }
            }
        }
        div.field {
            label for="content_selector" { "Content selector" }
            input #content_selector name="content_selector" value=(f.content_selector) aria-describedby="selector-hint";
            span.hint #selector-hint { "optional: only the component events whose content this selector selects" }
        }
        div.field { label { input type="checkbox" name="enabled" value="on" checked[f.enabled.is_some()]; " Enabled" } }
        div.field { label { input type="checkbox" name="batch" value="on" checked[f.batch.is_some()]; " Send several pending events of a repository in one request" } }
    })
}

async fn list_page(
    viewer: &Viewer,
    services: &Services,
    form: &WebhookForm,
    error: Option<ApiError>,
) -> Result<HttpResponse, UiError> {
    admin_of(viewer)?;
    let hooks = service::list(services).await?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let body = html! {
        h1 { "Webhooks" }
        (admin_nav(viewer, "/admin/webhooks"))
        @if hooks.is_empty() {
            p { "No webhook yet. A webhook sends each event it subscribes to as a signed POST to its receiver." }
        } @else {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Name" } th scope="col" { "Receiver" } th scope="col" { "Events" } th scope="col" { "Repository" } th scope="col" { "State" } } }
                tbody { @for h in &hooks { tr {
                    td { a href=(viewer.base.link(&format!("/admin/webhooks/{}", h.name))) { (h.name) } }
                    td.wrap { code { (h.url) } }
                    td { (h.events.join(", ")) }
                    td { (h.repository.as_deref().unwrap_or("every repository")) }
                    td { (if h.enabled { "enabled" } else { "disabled" }) @if h.batch { ", batched" } }
                } } }
            } }
        }
        h2 #create { "Create a webhook" }
        (refusal(&error))
        form.stack method="post" action=(viewer.base.link("/admin/webhooks")) {
            (viewer.csrf_field())
            (fields(services, form, true).await?)
            div { button type="submit" { "Create webhook" } }
        }
    };
    Ok(viewer.page_with(status, "Webhooks", body))
}

pub(super) async fn webhooks(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    let form = WebhookForm { enabled: Some("on".into()), ..WebhookForm::default() };
    list_page(&viewer, &services, &form, None).await
}

pub(super) async fn create_webhook(
    viewer: Viewer,
    services: web::Data<Services>,
    raw: web::Bytes,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    let f = form_of(&raw);
    viewer.check_csrf(f.csrf.as_deref())?;
    match service::create(&services, admin.actor(), f.body(true)).await {
        Ok(created) => {
            let notice = match &created.secret {
                Some(secret) => format!("Created. Its generated secret, shown only now: {secret}"),
                None => "Created.".to_string(),
            };
            webhook_page(&viewer, &services, &created.name, Some(notice), None, None, None).await
        }
        Err(e) => list_page(&viewer, &services, &f, Some(e.into())).await,
    }
}

#[derive(Deserialize)]
pub struct LogPage {
    before: Option<i64>,
}

pub(super) async fn webhook(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    q: web::Query<LogPage>,
) -> Result<HttpResponse, UiError> {
    webhook_page(&viewer, &services, &name, None, None, None, q.before).await
}

async fn webhook_page(
    viewer: &Viewer,
    services: &Services,
    name: &str,
    notice: Option<String>,
    error: Option<ApiError>,
    form: Option<WebhookForm>,
    before: Option<i64>,
) -> Result<HttpResponse, UiError> {
    admin_of(viewer)?;
    let hook = service::get(services, name).await?;
    let form = form.unwrap_or_else(|| WebhookForm::of(&hook));
    let log = service::deliveries(services, name, before, Some(50)).await?;
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let here = format!("/admin/webhooks/{name}");
    let body = html! {
        div.crumbs { a href=(viewer.base.link("/admin/webhooks")) { "Webhooks" } " / " }
        h1 { (name) " " span.badge { (if hook.enabled { "enabled" } else { "disabled" }) } }
        @if let Some(n) = &notice { p.notice role="status" { (n) } }
        (refusal(&error))
        dl.facts {
            dt { "Created" } dd { (at(&hook.created_at)) }
            dt { "Changed" } dd { (at(&hook.updated_at)) }
        }
        form method="post" action=(viewer.base.link(&format!("{here}/test"))) {
            (viewer.csrf_field())
            button.secondary type="submit" disabled[!hook.enabled] { "Send a test event" }
            " "
            span.muted { "a " code { (service::TEST_EVENT) } " event to this receiver alone; it appears in the log below" }
        }
        h2 #deliveries { "Deliveries" }
        @if log.deliveries.is_empty() {
            p.muted { "No delivery " @if before.is_some() { "older than these." } @else { "yet." } }
        } @else {
            div.table-wrap { table {
                thead { tr {
                    th.num scope="col" { "Delivery" } th scope="col" { "Event" } th scope="col" { "Repository" } th scope="col" { "State" }
                    th.num scope="col" { "Attempts" } th scope="col" { "Last answer" } th scope="col" { "Queued" } th scope="col" { "Delivered / next try" }
                } }
                tbody { @for d in &log.deliveries { tr {
                    td.num { (d.id) }
                    td { code { (d.event) } }
                    td { (d.repository.as_deref().unwrap_or("–")) }
                    td { span.badge { (d.state) } }
                    td.num { (d.attempts) }
                    td.wrap {
                        @if let Some(s) = d.last_status { "HTTP " (s) }
                        @if let Some(e) = &d.last_error { @if d.last_status.is_some() { " · " } (e) }
                        @if d.last_status.is_none() && d.last_error.is_none() { "–" }
                    }
                    td { (at(&d.created_at)) }
                    td {
                        @if let Some(t) = &d.delivered_at { (at(t)) }
                        @else if let Some(t) = &d.next_attempt_at { "next " (at(t)) }
                        @else { "–" }
                    }
                } } }
            } }
            p.muted { (count(log.deliveries.len() as i64, "delivery", "deliveries")) " on this page, newest first." }
        }
        nav.pager aria-label="Delivery log pages" {
            @if before.is_some() { a href=(viewer.base.link(&format!("{here}#deliveries"))) { "Newest" } }
            @if let Some(n) = log.next { a href=(viewer.base.link(&format!("{here}?before={n}#deliveries"))) { "Older" } }
        }
        h2 { "Change" }
        form.stack method="post" action=(viewer.base.link(&here)) {
            (viewer.csrf_field())
            (fields(services, &form, false).await?)
            div { button type="submit" { "Save changes" } }
        }
        h2 { "Delete" }
        form method="post" action=(viewer.base.link(&format!("{here}/delete"))) {
            (viewer.csrf_field())
            div.field { label { input type="checkbox" name="confirm" value="yes" required; " Delete " (name) " and its delivery log" } }
            div.actions { button.danger type="submit" { "Delete webhook" } }
        }
    };
    Ok(viewer.page_with(status, name, body))
}

pub(super) async fn update_webhook(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    raw: web::Bytes,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    let f = form_of(&raw);
    viewer.check_csrf(f.csrf.as_deref())?;
    match service::update(&services, admin.actor(), &name, f.body(false)).await {
        Ok(_) => webhook_page(&viewer, &services, &name, Some("Saved.".into()), None, None, None).await,
        Err(e) => webhook_page(&viewer, &services, &name, None, Some(e.into()), Some(f), None).await,
    }
}

pub(super) async fn test_webhook(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<Csrf>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    match service::send_test(&services, admin.actor(), &name).await {
        Ok(id) => {
            let notice = format!("Test event queued as delivery {id}; reload to see its answer.");
            webhook_page(&viewer, &services, &name, Some(notice), None, None, None).await
        }
        Err(e) => webhook_page(&viewer, &services, &name, None, Some(e.into()), None, None).await,
    }
}

pub(super) async fn delete_webhook(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<Confirm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let deleted = match f.unticked() {
        Some(e) => Err(e),
        None => service::delete(&services, admin.actor(), &name).await.map_err(ApiError::from),
    };
    match deleted {
        Ok(()) => Ok(viewer.redirect("/admin/webhooks")),
        Err(e) => webhook_page(&viewer, &services, &name, None, Some(e), None, None).await,
    }
}
