//! The man pages and shell completions, generated from the command line
//! itself ([`cli::command`]) so they cannot drift from `--help`: the Debian
//! package (tools/release) installs what `throttlescope man --dir` and
//! `throttlescope completions SHELL` print.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use clap_complete::Shell;

use super::cli;

const BIN: &str = "throttlescope";

/// Writes the completion script for `shell`.
pub fn completions(shell: Shell, out: &mut dyn Write) -> Result<()> {
    let mut cmd = cli::command();
    clap_complete::generate(shell, &mut cmd, BIN, out);
    out.flush().context("writing the completion script")
}

/// Prints the main page, or writes every page into `dir`.
pub fn man(dir: Option<&Path>) -> Result<()> {
    match dir {
        None => {
            let mut out = std::io::stdout().lock();
            main_page(&mut out)?;
            out.flush().context("writing the man page")
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            // throttlescope.1, throttlescope-watch.1, ...: `man throttlescope-watch`.
            clap_mangen::generate_to(cli::command(), dir)
                .with_context(|| format!("writing man pages into {}", dir.display()))
        }
    }
}

/// The page for `throttlescope` itself (it lists the subcommands; each has
/// its own page with `--dir`).
pub(crate) fn main_page(out: &mut dyn Write) -> Result<()> {
    clap_mangen::Man::new(cli::command())
        .manual("throttlescope manual")
        .render(out)
        .context("rendering the man page")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subcommands() -> Vec<String> {
        let names: Vec<String> = cli::command()
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        // A sanity floor: the list is not empty because clap was asked wrong.
        assert!(names.len() >= 8, "{names:?}");
        names
    }

    #[test]
    fn man_page_mentions_every_subcommand() {
        let mut page = Vec::new();
        main_page(&mut page).unwrap();
        let page = String::from_utf8(page).unwrap();
        assert!(page.starts_with(".ie") || page.contains(".TH throttlescope 1"));
        for name in subcommands() {
            // roff escapes `-` as `\-`; subcommand names here have none.
            assert!(
                page.contains(&format!("throttlescope\\-{name}")) || page.contains(&name),
                "the man page does not mention `{name}`"
            );
        }
    }

    #[test]
    fn man_dir_has_one_page_per_subcommand() {
        let dir = std::env::temp_dir().join(format!("throttlescope-man-{}", std::process::id()));
        man(Some(&dir)).unwrap();
        let mut want = vec![format!("{BIN}.1")];
        want.extend(subcommands().iter().map(|s| format!("{BIN}-{s}.1")));
        for page in &want {
            let text =
                std::fs::read_to_string(dir.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
            assert!(text.contains(".TH"), "{page} is not a man page");
        }
        // The watch page documents the watch options, not only a name.
        let watch = std::fs::read_to_string(dir.join(format!("{BIN}-watch.1"))).unwrap();
        assert!(watch.contains("interval") && watch.contains("metrics"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn completions_know_every_subcommand_in_each_shell() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut script = Vec::new();
            completions(shell, &mut script).unwrap();
            let script = String::from_utf8(script).unwrap();
            for name in subcommands() {
                assert!(script.contains(&name), "{shell}: no `{name}`");
            }
            // An option of a subcommand, not only the names.
            assert!(script.contains("all-netns"), "{shell}: no --all-netns");
        }
    }

    #[test]
    fn long_version_names_commit_and_bpf_objects() {
        let long = cli::command().render_long_version();
        assert!(
            long.contains(crate::shared::build_info::GIT_COMMIT),
            "{long}"
        );
        assert!(long.contains("flows.bpf.o sha256 "), "{long}");
        assert!(long.contains("hostq.bpf.o sha256 "), "{long}");
    }
}
