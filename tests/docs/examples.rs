//! Command-line examples in Markdown, and the matching of their expected output.
//!
//! An example is a fenced block whose info string is `console` (run by `tests/docs.rs`)
//! or `console TAG` (e.g. `console cluster`: left to whoever has what TAG needs). In it,
//! each line `$ PROGRAM ARGS...` starts an example; the lines after it, up to the next `$`
//! line or the end of the block, are what it prints:
//!
//! ```text
//! $ gatewright check -f docs/examples/broken.yaml
//! ! error: [..]
//! # exit 3
//! ```
//!
//! - lines before any `! ` line are the expected stdout;
//! - lines starting with `! ` (or a line that is only `!`) are the expected stderr, one
//!   line each, written after the stdout lines;
//! - an optional last line `# exit N` is the exit code (0 without it).
//!
//! In expected text, `[..]` matches any text within one line. Trailing blank lines are
//! not compared. ARGS are split at spaces; single and double quotes group words (no
//! escapes inside them), a backslash outside quotes takes the next character as it is.

#![allow(
    dead_code,
    reason = "shared with other test binaries, which use different parts"
)]

/// One `$` line of a `console` block and what it must print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// The words of the info string after `console` (`""` for a plain `console` block,
    /// `"cluster"` for `console cluster`).
    pub tag: String,
    /// Line of the `$` line in the Markdown (from 1), for messages.
    pub line: usize,
    /// The program (`gatewright`).
    pub program: String,
    /// The arguments after the program.
    pub args: Vec<String>,
    /// Expected stdout, one `\n` after each line (empty when none is expected).
    pub stdout: String,
    /// Expected stderr lines, without their `! ` prefix.
    pub stderr: Vec<String>,
    /// Expected exit code.
    pub exit: i32,
}

impl Example {
    /// The command as written after `$ `, for messages.
    pub fn command(&self) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The expected stderr as text, one `\n` after each line.
    pub fn stderr_text(&self) -> String {
        self.stderr.iter().map(|l| format!("{l}\n")).collect()
    }
}

/// Every example of every `console` block of `markdown`, in order. Panics, naming the
/// line, on a block it cannot read (text before the first `$` line, stdout after stderr,
/// lines after `# exit N`, unbalanced quotes).
pub fn examples(markdown: &str) -> Vec<Example> {
    parse(markdown).unwrap_or_else(|e| panic!("{e}"))
}

/// As [`examples`], with the reason as an error instead of a panic.
pub fn parse(markdown: &str) -> Result<Vec<Example>, String> {
    let mut out = Vec::new();
    let mut lines = markdown.lines().enumerate().map(|(i, l)| (i + 1, l));
    while let Some((n, line)) = lines.next() {
        let Some((fence, info)) = fence_open(line) else {
            continue;
        };
        let mut words = info.split_whitespace();
        let is_console = words.next() == Some("console");
        let tag = words.collect::<Vec<_>>().join(" ");
        let mut body = Vec::new();
        let mut closed = false;
        for (m, l) in lines.by_ref() {
            if is_fence_close(l, fence) {
                closed = true;
                break;
            }
            body.push((m, l));
        }
        if !closed {
            return Err(format!("line {n}: a code block is not closed"));
        }
        if is_console {
            block(&tag, n, &body, &mut out)?;
        }
    }
    Ok(out)
}

/// The fence (its character and length) and the info string of a line opening a fenced
/// code block.
fn fence_open(line: &str) -> Option<((char, usize), &str)> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let c = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = trimmed.chars().take_while(|x| *x == c).count();
    if len < 3 {
        return None;
    }
    let info = trimmed[len..].trim();
    if c == '`' && info.contains('`') {
        return None;
    }
    Some(((c, len), info))
}

fn is_fence_close(line: &str, (c, len): (char, usize)) -> bool {
    let trimmed = line.trim();
    line.len() - line.trim_start().len() <= 3
        && trimmed.chars().take_while(|x| *x == c).count() >= len
        && trimmed.chars().all(|x| x == c)
}

fn block(
    tag: &str,
    fence_line: usize,
    body: &[(usize, &str)],
    out: &mut Vec<Example>,
) -> Result<(), String> {
    let mut current: Option<(Example, bool, bool)> = None; // (example, in stderr, exit seen)
    for &(n, l) in body {
        if let Some(command) = l.strip_prefix("$ ") {
            if let Some((ex, _, _)) = current.take() {
                out.push(finish(ex));
            }
            let mut words = split_words(command).map_err(|e| format!("line {n}: {e}"))?;
            if words.is_empty() {
                return Err(format!("line {n}: `$` without a command"));
            }
            let program = words.remove(0);
            current = Some((
                Example {
                    tag: tag.to_owned(),
                    line: n,
                    program,
                    args: words,
                    stdout: String::new(),
                    stderr: Vec::new(),
                    exit: 0,
                },
                false,
                false,
            ));
            continue;
        }
        let Some((ex, in_stderr, exit_seen)) = current.as_mut() else {
            if l.trim().is_empty() {
                continue;
            }
            return Err(format!(
                "line {n}: text before the first `$` line of the console block at line {fence_line}"
            ));
        };
        if *exit_seen {
            if l.trim().is_empty() {
                continue;
            }
            return Err(format!("line {n}: text after `# exit N`"));
        }
        if let Some(code) = l.strip_prefix("# exit ") {
            ex.exit = code
                .trim()
                .parse()
                .map_err(|_| format!("line {n}: `# exit {code}` is not a number"))?;
            *exit_seen = true;
        } else if let Some(err) = l.strip_prefix("! ").or((l == "!").then_some("")) {
            ex.stderr.push(err.to_owned());
            *in_stderr = true;
        } else if *in_stderr {
            if l.trim().is_empty() {
                continue;
            }
            return Err(format!(
                "line {n}: stdout after stderr (stderr lines `! ...` come last)"
            ));
        } else {
            ex.stdout.push_str(l);
            ex.stdout.push('\n');
        }
    }
    if let Some((ex, _, _)) = current.take() {
        out.push(finish(ex));
    }
    Ok(())
}

/// Drops the trailing blank lines of the expected output.
fn finish(mut ex: Example) -> Example {
    while ex.stdout.ends_with("\n\n") || ex.stdout == "\n" {
        ex.stdout.pop();
    }
    while ex.stderr.last().is_some_and(|l| l.trim().is_empty()) {
        ex.stderr.pop();
    }
    ex
}

/// Splits a command line into words: spaces separate, quotes group, a backslash outside
/// quotes takes the next character as it is.
pub fn split_words(command: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some(x) if x == c => break,
                        Some(x) => word.push(x),
                        None => return Err(format!("unbalanced {c} in `{command}`")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// Whether `actual` is what `expected` describes: line by line, `[..]` in an expected line
/// matching any text within that line; trailing blank lines and a missing final newline
/// are not differences. On a mismatch, a diff: `-` lines expected and not printed, `+`
/// lines printed and not expected, ` ` lines both.
pub fn matches(expected: &str, actual: &str) -> Result<(), String> {
    let exp = significant_lines(expected);
    let act = significant_lines(actual);
    if exp.len() == act.len() && exp.iter().zip(&act).all(|(e, a)| line_matches(e, a)) {
        return Ok(());
    }
    Err(diff(&exp, &act))
}

fn significant_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    lines
}

/// Whether one actual line matches one expected line, `[..]` matching any text.
pub fn line_matches(expected: &str, actual: &str) -> bool {
    let mut parts = expected.split("[..]");
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = actual.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    // Each middle part at its first place: any later place would leave less text for
    // what follows, never more.
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// A line diff (longest common subsequence under `line_matches`).
fn diff(exp: &[&str], act: &[&str]) -> String {
    let (n, m) = (exp.len(), act.len());
    // lcs[i][j]: the longest common subsequence of exp[i..] and act[j..].
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if line_matches(exp[i], act[j]) {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = String::from("--- expected\n+++ actual\n");
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && line_matches(exp[i], act[j]) {
            out.push_str(&format!("  {}\n", act[j]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push_str(&format!("- {}\n", exp[i]));
            i += 1;
        } else {
            out.push_str(&format!("+ {}\n", act[j]));
            j += 1;
        }
    }
    out
}
