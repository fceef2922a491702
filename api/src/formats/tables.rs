//! The API's one list of route tables: the only place outside a format's own folders that
//! names each format (shared crates cannot name actix handlers).

/// The API's one list of route tables (shared crates cannot name actix handlers):
/// `with_routes!(format, R => expr)` evaluates `expr` with `R` the route table of `format`. A
/// macro, not a function, so that the dispatcher's future holds each table's future directly
/// (`repository::tests::the_request_future_stays_small`).
macro_rules! with_routes {
    ($format:expr, $routes:ident => $body:expr) => {
        match $format {
            packyard_model::repos::Format::Apt => {
                type $routes = $crate::formats::apt::Apt;
                $body
            }
            packyard_model::repos::Format::Apk => {
                type $routes = $crate::formats::apk::Apk;
                $body
            }
            packyard_model::repos::Format::Go => {
                type $routes = $crate::formats::go::Go;
                $body
            }
            packyard_model::repos::Format::Conan => {
                type $routes = $crate::formats::conan::Conan;
                $body
            }
            packyard_model::repos::Format::Sample => {
                type $routes = $crate::formats::sample::Sample;
                $body
            }
        }
    };
}
pub(crate) use with_routes;
