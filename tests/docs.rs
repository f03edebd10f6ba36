//! The documentation, checked: every relative link of `README.md`, `docs/*.md` and the
//! shipped classes' READMEs leads to a file and, for `#anchor`, to a heading of it; every
//! `console` example of `docs/*.md` prints what it shows (`tests/docs/examples.rs`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "docs/examples.rs"]
mod examples;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The pages of the book, sorted.
fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    pages
}

/// The Markdown files whose links are checked: the front page, the book, the shipped
/// classes' READMEs.
fn linked_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    files.extend(pages());
    let mut classes: Vec<PathBuf> = std::fs::read_dir(root().join("gatewayclasses"))
        .unwrap()
        .map(|e| e.unwrap().path().join("README.md"))
        .filter(|p| p.is_file())
        .collect();
    classes.sort();
    files.extend(classes);
    files
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The text outside fenced code blocks and code spans: code replaced by spaces, line
/// breaks kept, so that offsets still give line numbers.
fn prose(markdown: &str) -> String {
    blank_code_spans(&blank_code_blocks(markdown))
}

/// The text with its fenced code blocks (fences included) replaced by spaces.
fn blank_code_blocks(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut fence: Option<(char, usize)> = None;
    for line in markdown.split_inclusive('\n') {
        let trimmed = line.trim();
        let indent = line.len() - line.trim_start().len();
        let run = |c: char| trimmed.chars().take_while(|x| *x == c).count();
        match fence {
            Some((c, len)) => {
                if indent <= 3 && run(c) >= len && trimmed.chars().all(|x| x == c) {
                    fence = None;
                }
                out.extend(line.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
                continue;
            }
            None => {
                let c = trimmed.chars().next().unwrap_or(' ');
                if indent <= 3 && (c == '`' || c == '~') && run(c) >= 3 {
                    fence = Some((c, run(c)));
                    out.extend(line.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
                    continue;
                }
            }
        }
        out.push_str(line);
    }
    out
}

/// Replaces each code span (a run of backticks up to the next run of the same length) by
/// spaces.
fn blank_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = chars.clone();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let len = chars[i..].iter().take_while(|c| **c == '`').count();
        let mut j = i + len;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let l = chars[j..].iter().take_while(|c| **c == '`').count();
                if l == len {
                    close = Some(j);
                    break;
                }
                j += l;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                for c in &mut out[i..j + len] {
                    if *c != '\n' {
                        *c = ' ';
                    }
                }
                i = j + len;
            }
            None => i += len,
        }
    }
    out.into_iter().collect()
}

/// GitHub's anchor of a heading: its text without Markdown (code, emphasis, link
/// targets), lower case, every character but letters, digits, spaces, `-` and `_`
/// dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    // [text](target) -> text
    let mut text = String::new();
    let mut rest = heading;
    while let Some(i) = rest.find("](") {
        let Some(end) = rest[i..].find(')') else {
            break;
        };
        text.push_str(&rest[..i]);
        rest = &rest[i + end + 1..];
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors the headings of a Markdown text make, a repeated one numbered `-1`, `-2`,
/// ... as GitHub does.
fn anchors(markdown: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for line in blank_code_blocks(markdown).lines() {
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() > 3 {
            continue;
        }
        let level = trimmed.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&level) {
            continue;
        }
        let rest = &trimmed[level..];
        if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
            continue;
        }
        // A closing run of `#` is not part of the text.
        let text = rest.trim().trim_end_matches('#').trim_end();
        let base = anchor(text);
        let n = seen.entry(base.clone()).or_insert(0);
        out.push(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// Decodes `%XX` escapes of a link target.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && bytes[i + 1].is_ascii_hexdigit()
            && bytes[i + 2].is_ascii_hexdigit()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The targets of the inline links and images (`[text](target)`, `![alt](target)`) and of
/// the link definitions (`[label]: target`) of a Markdown text, with their line.
fn links(markdown: &str) -> Vec<(usize, String)> {
    let text = prose(markdown);
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("](") {
        let start = from + i + 2;
        let mut depth = 0usize;
        let mut end = None;
        for (j, c) in text[start..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = Some(start + j);
                    break;
                }
                ')' => depth -= 1,
                '\n' => break,
                _ => {}
            }
        }
        from = start;
        let Some(end) = end else { continue };
        let inner = text[start..end].trim();
        // A title after the target: `(target "title")`.
        let target = if let Some(t) = inner.strip_prefix('<') {
            t.split('>').next().unwrap_or_default()
        } else {
            inner.split_whitespace().next().unwrap_or_default()
        };
        out.push((line_of(start), target.to_owned()));
    }
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with('[')
            && let Some(i) = t.find("]:")
            && !t[..i].contains("](")
        {
            let target = t[i + 2..].split_whitespace().next().unwrap_or_default();
            out.push((n + 1, target.to_owned()));
        }
    }
    out
}

/// What is wrong with one link target of `file`, if anything.
fn check_link(
    file: &Path,
    target: &str,
    cache: &mut HashMap<PathBuf, Vec<String>>,
) -> Option<String> {
    if target.is_empty() {
        return Some("an empty link".to_owned());
    }
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    if target.starts_with('/') {
        return Some(format!(
            "{target}: an absolute path (GitHub reads it from the site's root); write it relative to the file"
        ));
    }
    let (path, fragment) = match target.split_once('#') {
        Some((p, f)) => (p, Some(f)),
        None => (target, None),
    };
    let path = percent_decode(path);
    let dest = if path.is_empty() {
        file.to_path_buf()
    } else {
        file.parent().unwrap().join(&path)
    };
    if !dest.exists() {
        return Some(format!("{target}: {} does not exist", relative(&dest)));
    }
    let fragment = fragment?;
    if dest.extension().is_none_or(|x| x != "md") {
        // Line anchors of other files (`#L10`) are GitHub's; nothing to check.
        return None;
    }
    let dest = dest.canonicalize().unwrap();
    let known = cache
        .entry(dest.clone())
        .or_insert_with(|| anchors(&std::fs::read_to_string(&dest).unwrap()));
    let fragment = percent_decode(fragment);
    if known.contains(&fragment) {
        None
    } else {
        Some(format!(
            "{target}: no heading of {} makes the anchor #{fragment}",
            relative(&dest)
        ))
    }
}

#[test]
fn relative_links_lead_to_files_and_headings() {
    let mut cache = HashMap::new();
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in linked_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, target) in links(&text) {
            checked += 1;
            if let Some(why) = check_link(&file, &target, &mut cache) {
                failures.push(format!("{}:{line}: {why}", relative(&file)));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the parser broken?"
    );
    assert!(
        failures.is_empty(),
        "{} broken links:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Runs one example from the repository root; a description of every difference.
fn run(example: &examples::Example) -> Result<(), String> {
    if example.program != "gatewright" {
        return Err(format!(
            "`{}`: only gatewright runs here (tag the block `console cluster` if it needs a cluster)",
            example.command()
        ));
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_gatewright"));
    command.args(&example.args).current_dir(root());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GATEWRIGHT_") {
            command.env_remove(key);
        }
    }
    let out = command
        .output()
        .map_err(|e| format!("`{}` did not start: {e}", example.command()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut problems = Vec::new();
    if let Err(diff) = examples::matches(&example.stdout, &stdout) {
        problems.push(format!("stdout differs:\n{diff}"));
    }
    if let Err(diff) = examples::matches(&example.stderr_text(), &stderr) {
        problems.push(format!("stderr (the `! ` lines) differs:\n{diff}"));
    }
    let code = out.status.code().unwrap_or(-1);
    if code != example.exit {
        problems.push(format!("exit {code}, the example says {}", example.exit));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("`{}`: {}", example.command(), problems.join("\n")))
    }
}

#[test]
fn cli_examples_print_what_the_pages_show() {
    let mut failures = Vec::new();
    let mut ran = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let found = examples::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", relative(&page)));
        for example in found {
            match example.tag.as_str() {
                "" => {}
                "cluster" => continue,
                other => {
                    failures.push(format!(
                        "{}:{}: unknown tag `console {other}` (`console` or `console cluster`)",
                        relative(&page),
                        example.line
                    ));
                    continue;
                }
            }
            if let Err(why) = run(&example) {
                failures.push(format!("{}:{}: {why}", relative(&page), example.line));
            }
            ran.push(example);
        }
    }
    assert!(
        failures.is_empty(),
        "{} examples differ from the binary:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // The command line page shows each offline command at work, and a failure.
    for command in ["render", "check", "graph"] {
        assert!(
            ran.iter()
                .any(|e| e.args.first().is_some_and(|a| a == command)),
            "docs/cli.md has no example of `gatewright {command}`"
        );
    }
    assert!(
        ran.iter().any(|e| e.exit != 0),
        "no example shows a failure and its exit code"
    );
}

#[test]
fn anchors_follow_github() {
    assert_eq!(
        anchor("RBAC, and a new child kind"),
        "rbac-and-a-new-child-kind"
    );
    assert_eq!(
        anchor("Where this differs from ../shared/design"),
        "where-this-differs-from-shareddesign"
    );
    assert_eq!(anchor("`gatewright graph`"), "gatewright-graph");
    assert_eq!(
        anchor("Real downstream controllers: cert-manager and external-dns"),
        "real-downstream-controllers-cert-manager-and-external-dns"
    );
    assert_eq!(
        anchor("Blueprint author's guide"),
        "blueprint-authors-guide"
    );
    assert_eq!(
        anchor("A [link](x.md) and snake_case"),
        "a-link-and-snake_case"
    );
    assert_eq!(
        anchors("# A\n\n```sh\n# not a heading\n```\n## A\n### `b` ###\n"),
        ["a", "a-1", "b"]
    );
}

#[test]
fn links_are_read_outside_code() {
    let md = "[a](x.md) `[b](y.md)`\n```\n[c](z.md)\n```\n![d](img.png \"title\") [e](<sp ace.md>)\n[f]: def.md\n";
    let found: Vec<String> = links(md).into_iter().map(|(_, t)| t).collect();
    assert_eq!(found, ["x.md", "img.png", "sp ace.md", "def.md"]);
    assert_eq!(percent_decode("a%20b.md"), "a b.md");
}

#[test]
fn examples_are_parsed_and_matched() {
    let md = "text\n\n```console\n$ gatewright check -f 'a b.yaml'\nok: [..]\n\n! error: x\n# exit 3\n$ gatewright crds\n```\n\n````markdown\n```console\n$ gatewright nothing\n```\n````\n\n```console cluster\n$ gatewright status\n```\n";
    let found = examples::examples(md);
    assert_eq!(found.len(), 3, "{found:?}");
    assert_eq!(found[0].tag, "");
    assert_eq!(found[0].line, 4);
    assert_eq!(found[0].args, ["check", "-f", "a b.yaml"]);
    assert_eq!(found[0].stdout, "ok: [..]\n");
    assert_eq!(found[0].stderr, ["error: x"]);
    assert_eq!(found[0].exit, 3);
    assert_eq!(found[1].args, ["crds"]);
    assert_eq!((found[1].stdout.as_str(), found[1].exit), ("", 0));
    assert_eq!(found[2].tag, "cluster");
    assert!(examples::parse("```console\nstray\n$ gatewright crds\n```\n").is_err());
    assert!(examples::parse("```console\n$ gatewright crds\n! e\nout\n```\n").is_err());
    assert!(examples::parse("```console\n$ gatewright crds\n# exit 2\nmore\n```\n").is_err());

    assert!(examples::matches("a [..] c\nd\n", "a b c\nd").is_ok());
    assert!(examples::matches("[..]", "anything").is_ok());
    assert!(examples::matches("a[..]", "a").is_ok());
    assert!(examples::matches("x[..]y[..]z", "xyyz").is_ok());
    assert!(examples::matches("x[..]y[..]z", "xzy").is_err());
    assert!(examples::matches("a\n", "a\nb\n").is_err());
    assert!(examples::matches("", "").is_ok());
    assert!(examples::matches("", "\n\n").is_ok());
    let diff = examples::matches("one\ntwo\nthree\n", "one\n2\nthree\n").unwrap_err();
    assert_eq!(
        diff,
        "--- expected\n+++ actual\n  one\n- two\n+ 2\n  three\n"
    );
}
