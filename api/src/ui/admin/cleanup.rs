//! Cleanup policies: the list, a policy's page (its criteria in words, its schedule, its runs on
//! each repository, "run now", a preview of what a run would remove from one of its
//! repositories), and the form that creates or changes one (a field per criterion, not JSON).

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use maud::{html, Markup};
use packyard_core::admin::cleanup::{self as service, PolicyView, PreviewRequest, RunView};
use packyard_core::services::Services;
use packyard_model::cleanup::{Criteria, PolicySpec, Schedule};
use packyard_model::repos::{Format, RepoType};
use serde::Deserialize;

use super::super::browse::urlencode;
use super::super::{at, count};
use super::*;

/// The policy form; repositories arrive as `repository=<name>`, once per box ticked.
#[derive(Default, Clone)]
pub struct PolicyForm {
    csrf: Option<String>,
    name: String,
    format: String,
    description: String,
    published_before_days: String,
    last_downloaded_before_days: String,
    name_regex: String,
    version_regex: String,
    prereleases_only: bool,
    keep_latest: String,
    keep_latest_revisions: String,
    /// `none`, `every` or `cron`.
    schedule: String,
    every_minutes: String,
    cron: String,
    repositories: Vec<String>,
}

impl PolicyForm {
    fn parse(raw: &[u8]) -> Self {
        let mut f = Self::default();
        for (k, v) in url::form_urlencoded::parse(raw) {
            let v = v.into_owned();
            match k.as_ref() {
                "csrf" => f.csrf = Some(v),
                "name" => f.name = v,
                "format" => f.format = v,
                "description" => f.description = v,
                "published_before_days" => f.published_before_days = v,
                "last_downloaded_before_days" => f.last_downloaded_before_days = v,
                "name_regex" => f.name_regex = v,
                "version_regex" => f.version_regex = v,
                "prereleases_only" => f.prereleases_only = true,
                "keep_latest" => f.keep_latest = v,
                "keep_latest_revisions" => f.keep_latest_revisions = v,
                "schedule" => f.schedule = v,
                "every_minutes" => f.every_minutes = v,
                "cron" => f.cron = v,
                "repository" => f.repositories.push(v),
                _ => {}
            }
        }
        f
    }

    fn of(p: &PolicyView) -> Self {
        let n = |v: Option<u32>| v.map(|n| n.to_string()).unwrap_or_default();
        let c = &p.criteria;
        let (schedule, every_minutes, cron) = match &p.schedule {
            Some(Schedule { cron: Some(c), .. }) => ("cron", String::new(), c.clone()),
            // Three decimals of a minute hold any whole number of seconds exactly.
            Some(Schedule { every_secs: Some(s), .. }) => ("every", decimals(*s as f64 / 60.0), String::new()),
            _ => ("none", String::new(), String::new()),
        };
        Self {
            csrf: None,
            name: p.name.clone(),
            format: p.format.clone(),
            description: p.description.clone(),
            published_before_days: n(c.published_before_days),
            last_downloaded_before_days: n(c.last_downloaded_before_days),
            name_regex: c.name_regex.clone().unwrap_or_default(),
            version_regex: c.version_regex.clone().unwrap_or_default(),
            prereleases_only: c.prereleases_only,
            keep_latest: n(c.keep_latest),
            keep_latest_revisions: n(c.keep_latest_revisions),
            schedule: schedule.into(),
            every_minutes,
            cron,
            repositories: p.repositories.clone(),
        }
    }

    /// The API's body, or the field a person must correct.
    fn spec(&self, creating: bool) -> Result<PolicySpec, String> {
        let number = |label: &str, v: &str| -> Result<Option<u32>, String> {
            let v = v.trim();
            if v.is_empty() {
                return Ok(None);
            }
            v.parse::<u32>().map(Some).map_err(|_| format!("{label}: {v:?} is not a whole number"))
        };
        let text = |v: &str| Some(v.trim().to_string()).filter(|v| !v.is_empty());
        let format =
            self.format.parse::<Format>().map_err(|_| format!("format: choose one ({:?} is none)", self.format))?;
        let criteria = Criteria {
            published_before_days: number("Published more than … days ago", &self.published_before_days)?,
            last_downloaded_before_days: number(
                "Last downloaded more than … days ago",
                &self.last_downloaded_before_days,
            )?,
            name_regex: text(&self.name_regex),
            version_regex: text(&self.version_regex),
            prereleases_only: self.prereleases_only,
            keep_latest: number("Keep the newest … versions", &self.keep_latest)?,
            keep_latest_revisions: number("Keep the newest … recipe revisions", &self.keep_latest_revisions)?,
        };
        let schedule = match self.schedule.as_str() {
            "every" => {
                let minutes = self.every_minutes.trim();
                let m: f64 = minutes.parse().map_err(|_| format!("Every … minutes: {minutes:?} is not a number"))?;
                if !m.is_finite() || m <= 0.0 {
                    return Err(format!("Every … minutes: {minutes:?} must be more than 0"));
                }
                Some(Schedule { every_secs: Some((m * 60.0).round() as u64), cron: None })
            }
            "cron" => Some(Schedule { every_secs: None, cron: text(&self.cron) }),
            _ => None,
        };
        Ok(PolicySpec {
            name: creating.then(|| self.name.trim().to_string()),
            format,
            description: self.description.trim().to_string(),
            criteria,
            schedule,
            repositories: self.repositories.clone(),
        })
    }
}

fn decimals(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A policy's criteria in words.
fn criteria_words(c: &Criteria) -> Vec<String> {
    let days = |n: u32| count(i64::from(n), "day", "days");
    let mut out = Vec::new();
    if let Some(n) = c.published_before_days {
        out.push(format!("published more than {} ago", days(n)));
    }
    if let Some(n) = c.last_downloaded_before_days {
        out.push(format!("not downloaded for {}", days(n)));
    }
    if let Some(r) = &c.name_regex {
        out.push(format!("name matches {r}"));
    }
    if let Some(r) = &c.version_regex {
        out.push(format!("version matches {r}"));
    }
    if c.prereleases_only {
        out.push("pre-releases only".into());
    }
    if let Some(n) = c.keep_latest {
        out.push(format!("keeping the newest {}", count(i64::from(n), "version", "versions")));
    }
    if let Some(n) = c.keep_latest_revisions {
        out.push(format!("keeping the newest {}", count(i64::from(n), "recipe revision", "recipe revisions")));
    }
    out
}

fn schedule_words(s: &Option<Schedule>) -> String {
    match s {
        Some(Schedule { cron: Some(c), .. }) => format!("at {c} (cron, UTC)"),
        Some(Schedule { every_secs: Some(secs), .. }) if secs % 3600 == 0 => {
            format!("every {}", count((*secs / 3600) as i64, "hour", "hours"))
        }
        Some(Schedule { every_secs: Some(secs), .. }) => format!("every {} minutes", decimals(*secs as f64 / 60.0)),
        _ => "only when run by hand".into(),
    }
}

fn run_words(r: &RunView) -> Markup {
    html! {
        @match r.state {
            "running" => { "running" @if let Some(t) = &r.last_started { " since " (at(t)) } }
            "requested" => { "requested" @if let Some(by) = &r.requested_by { " by " (by) } @if let Some(t) = &r.requested_at { " " (at(t)) } }
            _ => {
                @if let Some(t) = &r.last_finished {
                    (count(r.components, "component", "components")) " removed (" (bytes(r.bytes)) ") " (at(t))
                    @if let Some(e) = &r.error { " · " span.error-text { (e) } }
                } @else if r.state == "interrupted" {
                    "interrupted; it goes on at the next run"
                } @else { "never run" }
            }
        }
    }
}

/// The criteria fields, each shown for the formats it applies to.
fn policy_fields(f: &PolicyForm, creating: bool) -> Markup {
    let formats = packyard_formats::registry();
    let names: Vec<(&str, &str)> = formats.offered().map(|s| (s.format().as_str(), s.ui().title())).collect();
    let only_for = |pick: fn(&packyard_model::cleanup::Selectable) -> Option<&'static str>| -> Vec<&'static str> {
        formats.offered().filter(|s| pick(&s.catalogue().selectable()).is_some()).map(|s| s.format().as_str()).collect()
    };
    let prereleases = only_for(|s| s.prereleases);
    let revisions = only_for(|s| s.revisions);
    // Creating, every format's fields are there (a script shows the chosen format's); editing,
    // only those of the policy's format.
    let has = |formats: &[&str]| creating || formats.contains(&f.format.as_str());
    html! {
        @if creating {
            (field("name", "Name", &f.name, "letters, digits, '.', '_' and '-'"))
            (select("format", "Format", &names, &f.format))
        } @else {
            input type="hidden" name="format" value=(f.format);
        }
        (field("description", "Description", &f.description, "optional"))
        fieldset {
            legend { "Remove components that are…" }
            p.muted { "Every criterion given must hold (they combine with AND); leave the others empty." }
            (field("published_before_days", "Published more than … days ago", &f.published_before_days, "a whole number of days"))
            (field("last_downloaded_before_days", "Last downloaded more than … days ago", &f.last_downloaded_before_days, "never downloaded counts from publication"))
            (field("name_regex", "Name matches", &f.name_regex, "a regular expression; anchor it (^…$) to match the whole name"))
            (field("version_regex", "Version matches", &f.version_regex, "a regular expression, e.g. ^1\\."))
            (field("keep_latest", "Keep the newest … versions", &f.keep_latest, "of each package, whatever else matches"))
            @if has(&prereleases) {
                div.field data-formats=(prereleases.join(" ")) {
                    label { input type="checkbox" name="prereleases_only" value="on" checked[f.prereleases_only]; " Pre-releases only (Go pre-release and pseudo-versions, Conan revisions that are not the latest)" }
                }
            }
            @if has(&revisions) {
                div data-formats=(revisions.join(" ")) {
                    (field("keep_latest_revisions", "Keep the newest … recipe revisions", &f.keep_latest_revisions, "Conan: of each reference"))
                }
            }
        }
        fieldset {
            legend { "Schedule" }
            @for (value, label) in [("none", "Only when run by hand"), ("every", "Every … minutes"), ("cron", "At the times of a cron expression (UTC)")] {
                div.field { label { input type="radio" name="schedule" value=(value) checked[f.schedule == value || (f.schedule.is_empty() && value == "none")]; " " (label) } }
            }
            (field("every_minutes", "Every … minutes", &f.every_minutes, "e.g. 1440 for once a day; at least 1"))
            (field("cron", "Cron expression", &f.cron, "five fields, UTC, e.g. 0 3 * * *"))
        }
    }
}

/// The repositories a policy of `format` may clean (hosted and proxy), to tick.
async fn repository_boxes(services: &Services, f: &PolicyForm, creating: bool) -> Result<Markup, UiError> {
    let repos = services.db.list_repositories().await?;
    let eligible: Vec<_> = repos
        .iter()
        .filter(|r| r.repo_type != RepoType::Group && (creating || r.format.as_str() == f.format))
        .collect();
    Ok(html! {
        fieldset {
            legend { "Repositories it cleans" }
            @if eligible.is_empty() { p.muted { "No hosted or proxy repository of this format yet." } }
            @for r in eligible {
                div.field data-formats=[creating.then_some(r.format.as_str())] {
                    label { input type="checkbox" name="repository" value=(r.name.as_str()) checked[f.repositories.iter().any(|x| x == r.name.as_str())]; " " (r.name.as_str()) " " span.badge { (r.format.as_str()) } " " span.badge { (r.repo_type.as_str()) } }
                }
            }
        }
    })
}

async fn list_page(
    viewer: &Viewer,
    services: &Services,
    form: &PolicyForm,
    error: Option<ApiError>,
) -> Result<HttpResponse, UiError> {
    admin_of(viewer)?;
    let policies = service::list(services).await?;
    let mut runs = Vec::with_capacity(policies.len());
    for p in &policies {
        runs.push(service::runs(services, &p.name).await?.items);
    }
    let status = error.as_ref().map_or(StatusCode::OK, |e| e.code.status());
    let body = html! {
        h1 { "Cleanup policies" }
        (admin_nav(viewer, "/admin/cleanup"))
        @if policies.is_empty() {
            p { "No cleanup policy yet. A policy removes the components of its repositories that match its criteria, when run by hand or on its schedule." }
        } @else {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Policy" } th scope="col" { "Format" } th scope="col" { "Removes" } th scope="col" { "Runs" } th scope="col" { "Last runs" } } }
                tbody { @for (p, r) in policies.iter().zip(&runs) {
                    tr {
                        td { a href=(viewer.base.link(&format!("/admin/cleanup/{}", p.name))) { (p.name) } }
                        td { (p.format) }
                        td { (criteria_words(&p.criteria).join("; ")) }
                        td { (schedule_words(&p.schedule)) }
                        td { @if r.is_empty() { "cleans no repository" } @else { ul.plain { @for run in r {
                            li { (run.repository) ": " (run_words(run)) }
                        } } } }
                    }
                } }
            } }
        }
        h2 #create { "Create a policy" }
        (refusal(&error))
        form.stack method="post" action=(viewer.base.link("/admin/cleanup")) {
            (viewer.csrf_field())
            (policy_fields(form, true))
            (repository_boxes(services, form, true).await?)
            div { button type="submit" { "Create policy" } }
        }
    };
    Ok(viewer.page_with(status, "Cleanup", body))
}

pub(super) async fn cleanup(viewer: Viewer, services: web::Data<Services>) -> Result<HttpResponse, UiError> {
    let format = packyard_formats::registry().offered().next().map(|s| s.format().to_string()).unwrap_or_default();
    let form = PolicyForm { format, schedule: "none".into(), ..PolicyForm::default() };
    list_page(&viewer, &services, &form, None).await
}

pub(super) async fn create_policy(
    viewer: Viewer,
    services: web::Data<Services>,
    raw: web::Bytes,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    let f = PolicyForm::parse(&raw);
    viewer.check_csrf(f.csrf.as_deref())?;
    let created = match f.spec(true) {
        Ok(spec) => {
            service::create(&services, packyard_formats::registry(), admin.actor(), spec).await.map_err(ApiError::from)
        }
        Err(m) => Err(ApiError::bad_request(m)),
    };
    match created {
        Ok(p) => Ok(viewer.redirect(&format!("/admin/cleanup/{}", p.name))),
        Err(e) => list_page(&viewer, &services, &f, Some(e)).await,
    }
}

#[derive(Deserialize, Default)]
pub struct PreviewQuery {
    repository: Option<String>,
    /// The preview's continuation token: a later page.
    after: Option<String>,
}

pub(super) async fn policy(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    q: web::Query<PreviewQuery>,
) -> Result<HttpResponse, UiError> {
    policy_page(&viewer, &services, &name, &q, None, None, None).await
}

async fn policy_page(
    viewer: &Viewer,
    services: &Services,
    name: &str,
    q: &PreviewQuery,
    notice: Option<String>,
    error: Option<ApiError>,
    form: Option<PolicyForm>,
) -> Result<HttpResponse, UiError> {
    admin_of(viewer)?;
    let p = service::get(services, name).await?;
    let runs = service::runs(services, name).await?.items;
    let form = form.unwrap_or_else(|| PolicyForm::of(&p));
    let (preview, preview_error) = match q.repository.as_deref().filter(|r| !r.is_empty()) {
        Some(repository) => {
            // Pages whose work is bounded: no totals (those walk the whole repository).
            let request =
                PreviewRequest { repository: Some(repository), continuation_token: q.after.as_deref(), count: false };
            match service::preview(services, packyard_formats::registry(), name, request).await {
                Ok(v) => (Some(v), None),
                Err(e) => (None, Some(ApiError::from(e))),
            }
        }
        None => (None, None),
    };
    let status = error.as_ref().or(preview_error.as_ref()).map_or(StatusCode::OK, |e| e.code.status());
    let here = format!("/admin/cleanup/{name}");
    let body = html! {
        div.crumbs { a href=(viewer.base.link("/admin/cleanup")) { "Cleanup policies" } " / " }
        h1 { (name) " " span.badge { (p.format) } }
        @if let Some(n) = &notice { p.notice role="status" { (n) } }
        (refusal(&error))
        dl.facts {
            @if !p.description.is_empty() { dt { "Description" } dd { (p.description) } }
            dt { "Removes" } dd { (criteria_words(&p.criteria).join("; ")) }
            dt { "Runs" } dd { (schedule_words(&p.schedule)) }
            dt { "Changed" } dd { (at(&p.updated_at)) }
        }
        h2 #runs { "Runs" }
        @if runs.is_empty() {
            p.muted { "It cleans no repository: tick one below." }
        } @else {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Repository" } th scope="col" { "State" } th scope="col" { "Started" } th scope="col" { "Finished" } th.num scope="col" { "Took" } th.num scope="col" { "Removed" } th.num scope="col" { "Freed" } th scope="col" { "Error" } } }
                tbody { @for r in &runs { tr {
                    td { a href=(viewer.base.link(&format!("/browse/{}", r.repository))) { (r.repository) } }
                    td { span.badge { (r.state) } @if let (Some(by), Some(_)) = (&r.requested_by, &r.requested_at) { " by " (by) } }
                    td { @if let Some(t) = &r.last_started { (at(t)) } @else { "–" } }
                    td { @if let Some(t) = &r.last_finished { (at(t)) } @else { "–" } }
                    td.num { @if let Some(ms) = r.duration_ms { (format!("{:.1} s", ms as f64 / 1000.0)) } @else { "–" } }
                    td.num { @if r.last_finished.is_some() { (count(r.components, "component", "components")) } @else { "–" } }
                    td.num { @if r.last_finished.is_some() { (bytes(r.bytes)) } @else { "–" } }
                    td.wrap { (r.error.as_deref().unwrap_or("")) }
                } } }
            } }
            form method="post" action=(viewer.base.link(&format!("{here}/run"))) {
                (viewer.csrf_field())
                button type="submit" { "Run now on every repository" }
                " " span.muted { "a worker starts it within moments; reload to follow it" }
            }
        }
        h2 #preview { "Preview" }
        form.search method="get" action=(viewer.base.link(&format!("{here}#preview"))) {
            div.field {
                label for="repository" { "Repository" }
                select #repository name="repository" {
                    @for r in &p.repositories { option value=(r) selected[q.repository.as_deref() == Some(r.as_str())] { (r) } }
                }
            }
            button type="submit" disabled[p.repositories.is_empty()] { "Preview" }
        }
        (refusal(&preview_error))
        @if let Some(pv) = &preview {
            @let items = &pv.items;
            @let next = pv.continuation_token.as_deref();
            @let repository = pv.repository.as_str();
            @let total: i64 = items.iter().map(|i| i.bytes).sum();
            @if q.after.is_none() && next.is_none() {
                p role="status" { "A run now would remove " strong { (count(items.len() as i64, "component", "components")) } " (" (bytes(total)) ") from " (repository) "." }
            } @else if items.is_empty() {
                p role="status" { "Nothing more in this stretch of " (repository) "'s names; the walk goes on from there." }
            } @else {
                p role="status" { "A run now would remove these " strong { (count(items.len() as i64, "component", "components")) } " (" (bytes(total)) ") from " (repository) @if next.is_some() { ", and more on the next pages" } "." }
            }
            @if !items.is_empty() {
                div.table-wrap { table {
                    thead { tr { th scope="col" { "Name" } th scope="col" { "Version" } th.num scope="col" { "Size" } th scope="col" { "Published" } th scope="col" { "Last downloaded" } } }
                    tbody { @for i in items { tr {
                        td.wrap { (i.name) } td.wrap { (i.version) }
                        td.num { (bytes(i.bytes)) } td { (at(&i.published)) }
                        td { @if let Some(t) = &i.last_downloaded { (at(t)) } @else { "never" } }
                    } } }
                } }
            }
            @let page = format!("{here}?repository={}", urlencode(repository));
            nav.pager aria-label="Preview pages" {
                @if q.after.is_some() { a href=(viewer.base.link(&format!("{page}#preview"))) { "First page" } }
                @if let Some(n) = next { a href=(viewer.base.link(&format!("{page}&after={}#preview", urlencode(n)))) { "Next page" } }
            }
            @if !items.is_empty() {
                form method="post" action=(viewer.base.link(&format!("{here}/run"))) {
                    (viewer.csrf_field())
                    input type="hidden" name="repository" value=(repository);
                    button.danger type="submit" { "Run now on " (repository) }
                }
            }
        }
        h2 { "Change" }
        form.stack method="post" action=(viewer.base.link(&here)) {
            (viewer.csrf_field())
            (policy_fields(&form, false))
            (repository_boxes(services, &form, false).await?)
            div { button type="submit" { "Save changes" } }
        }
        h2 { "Delete" }
        form method="post" action=(viewer.base.link(&format!("{here}/delete"))) {
            (viewer.csrf_field())
            div.field { label { input type="checkbox" name="confirm" value="yes" required; " Delete the policy " (name) " (what it removed stays removed)" } }
            div.actions { button.danger type="submit" { "Delete policy" } }
        }
    };
    Ok(viewer.page_with(status, name, body))
}

pub(super) async fn update_policy(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    raw: web::Bytes,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    let f = PolicyForm::parse(&raw);
    viewer.check_csrf(f.csrf.as_deref())?;
    let updated = match f.spec(false) {
        Ok(spec) => service::update(&services, packyard_formats::registry(), admin.actor(), &name, spec)
            .await
            .map_err(ApiError::from),
        Err(m) => Err(ApiError::bad_request(m)),
    };
    let q = PreviewQuery::default();
    match updated {
        Ok(_) => policy_page(&viewer, &services, &name, &q, Some("Saved.".into()), None, None).await,
        Err(e) => policy_page(&viewer, &services, &name, &q, None, Some(e), Some(f)).await,
    }
}

#[derive(Deserialize)]
pub struct RunForm {
    csrf: Option<String>,
    repository: Option<String>,
}

pub(super) async fn run_policy(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
    f: web::Form<RunForm>,
) -> Result<HttpResponse, UiError> {
    let admin = admin_of(&viewer)?;
    viewer.check_csrf(f.csrf.as_deref())?;
    let q = PreviewQuery::default();
    match service::run_now(&services, admin.actor(), &name, f.repository.as_deref()).await {
        Ok(runs) => {
            let on: Vec<&str> = runs.items.iter().map(|r| r.repository.as_str()).collect();
            let notice = format!("Run requested on {}; a worker starts it within moments.", on.join(", "));
            policy_page(&viewer, &services, &name, &q, Some(notice), None, None).await
        }
        Err(e) => policy_page(&viewer, &services, &name, &q, None, Some(e.into()), None).await,
    }
}

pub(super) async fn delete_policy(
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
        Ok(()) => Ok(viewer.redirect("/admin/cleanup")),
        Err(e) => policy_page(&viewer, &services, &name, &PreviewQuery::default(), None, Some(e), None).await,
    }
}
