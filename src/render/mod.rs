//! Rendering: the template engine, the values merge, the context (template variables),
//! the dependency graph between templates, and the checks on what templates produce.
//! Pure: no client, no clock, no I/O.

pub mod context;
pub mod diagram;
pub mod engine;
mod filters;
pub mod graph;
pub mod labels;
pub mod lazy;
pub mod library;
pub mod output;
pub mod prepared;
pub mod remembered;
pub mod scope;
pub mod values;
pub mod view;

pub use engine::{Compiled, TemplateSet};
pub use labels::safe_name;

/// Nesting depth of calls, includes and blocks.
pub const RECURSION_LIMIT: usize = 64;

/// The category (Event reason, metric label) of an object refused for crossing the
/// tenancy boundary (`crate::gateway::boundary`).
pub const BOUNDARY_CATEGORY: &str = "TenancyBoundary";

/// A template failed: names the blueprint, the template, the line and the cause.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.display())]
pub struct RenderError {
    /// Blueprint name.
    pub blueprint: String,
    /// Template name (`status` for the status template).
    pub template: String,
    /// 1-based line in the template source, when known.
    pub line: Option<usize>,
    /// What went wrong.
    pub message: String,
    /// A short PascalCase category for Event reasons and metrics.
    pub category: &'static str,
}

impl RenderError {
    /// A template error with the generic category.
    #[must_use]
    pub fn new(blueprint: &str, template: &str, line: Option<usize>, message: String) -> Self {
        Self {
            blueprint: blueprint.to_owned(),
            template: template.to_owned(),
            line,
            message,
            category: "TemplateError",
        }
    }

    /// With another category.
    #[must_use]
    pub fn with_category(mut self, category: &'static str) -> Self {
        self.category = category;
        self
    }

    /// From a minijinja error, keeping its line and a one-line cause.
    #[must_use]
    pub fn from_minijinja(blueprint: &str, template: &str, err: &minijinja::Error) -> Self {
        use minijinja::ErrorKind as K;
        let category = match err.kind() {
            K::SyntaxError | K::UnknownBlock | K::InvalidDelimiter | K::BadEscape => {
                "TemplateSyntax"
            }
            K::UndefinedError => "UndefinedVariable",
            K::OutOfFuel => "TemplateOutOfFuel",
            _ => "TemplateError",
        };
        let mut message = err.kind().to_string();
        if let Some(detail) = err.detail() {
            message = format!("{message}: {detail}");
        }
        if err.kind() == K::InvalidOperation && message.contains("recursion") {
            message = format!("{message} (recursion limit {})", RECURSION_LIMIT);
        }
        Self {
            blueprint: blueprint.to_owned(),
            template: template.to_owned(),
            line: err.line(),
            message,
            category,
        }
    }

    fn display(&self) -> String {
        match self.line {
            Some(line) => format!(
                "blueprint {}: template {}: line {line}: {}",
                self.blueprint, self.template, self.message
            ),
            None => format!(
                "blueprint {}: template {}: {}",
                self.blueprint, self.template, self.message
            ),
        }
    }
}
