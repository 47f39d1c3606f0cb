//! The packages line of `run_code`'s description.

/// The most packages `run_code`'s description names; the rest are counted.
const LISTED_PACKAGES: usize = 200;

/// What a Python program may import beyond the standard library, for the model: the sentence
/// `run_code`'s description ends with (and `code-runtime describe --python` prints).
pub fn packages_line(packages: &[(String, String)]) -> String {
    let listed: Vec<String> = packages
        .iter()
        .take(LISTED_PACKAGES)
        .map(|(name, version)| format!("{name} {version}"))
        .collect();
    let more = packages.len().saturating_sub(LISTED_PACKAGES);
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!(" Python programs can import these packages: {}{more}.", listed.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_packages_line_names_each_package_with_its_version_and_counts_the_rest() {
        let packages = |count: usize| -> Vec<(String, String)> {
            (0..count).map(|n| (format!("p{n}"), format!("1.{n}"))).collect()
        };
        assert_eq!(
            packages_line(&packages(2)),
            " Python programs can import these packages: p0 1.0, p1 1.1."
        );
        let many = packages_line(&packages(LISTED_PACKAGES + 5));
        assert!(
            many.ends_with(&format!(
                "p{} 1.{} and 5 more.",
                LISTED_PACKAGES - 1,
                LISTED_PACKAGES - 1
            )),
            "{many}"
        );
        assert!(!many.contains(&format!("p{} ", LISTED_PACKAGES)), "{many}");
    }
}
