//! `#SBATCH` lines of a batch script. slurmrestd ignores them (only `sbatch` reads them),
//! so `slurm jobs submit` applies them itself, command-line flags taking precedence.

use super::jobs::SubmitArgs;
use crate::format;

/// The options sbatch would read from `script`: the words of every `#SBATCH` line before
/// the first command (blank lines and other comments are skipped, as sbatch does).
pub fn words(script: &str) -> Vec<Vec<String>> {
    script
        .lines()
        .skip(1) // the #! line
        .map(str::trim)
        .take_while(|l| l.is_empty() || l.starts_with('#'))
        .filter_map(|l| l.strip_prefix("#SBATCH"))
        .filter(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace))
        .map(split)
        .collect()
}

/// Splits like a shell would (whitespace, single and double quotes); a word starting with
/// `#` ends the line.
fn split(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, '#') if word.is_none() => break,
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// Fills the options of `args` not given on the command line from the script's `#SBATCH`
/// lines. Returns a warning for every option it does not know (those are left out).
pub fn apply(args: &mut SubmitArgs, lines: &[Vec<String>]) -> Result<Vec<String>, String> {
    let mut ignored = Vec::new();
    for line in lines {
        let mut words = line.iter().peekable();
        while let Some(word) = words.next() {
            let (key, inline) = match word.strip_prefix("--") {
                Some(long) => match long.split_once('=') {
                    Some((k, v)) => (k.to_string(), Some(v.to_string())),
                    None => (long.to_string(), None),
                },
                None => match word.strip_prefix('-').filter(|s| !s.is_empty()) {
                    Some(short) => {
                        // The option letter is one character, not one byte: `-é` must
                        // not cut inside it.
                        let first = short.chars().next().map_or(0, char::len_utf8);
                        let (k, v) = short.split_at(first);
                        (k.to_string(), Some(v.to_string()).filter(|v| !v.is_empty()))
                    }
                    None => {
                        ignored.push(format!("#SBATCH {word}: not an option"));
                        continue;
                    }
                },
            };
            if matches!(key.as_str(), "H" | "hold") {
                args.hold = true;
                continue;
            }
            let value = match inline {
                Some(v) => v,
                None => match words.next_if(|w| !w.starts_with('-')) {
                    Some(v) => v.clone(),
                    None if known(&key) => {
                        return Err(format!("#SBATCH {word} needs a value"));
                    }
                    None => String::new(),
                },
            };
            if !set(args, &key, &value)? {
                ignored.push(format!(
                    "#SBATCH {word} is not supported by `slurm jobs submit`: ignored"
                ));
            }
        }
    }
    Ok(ignored)
}

/// Options [`set`] knows, by sbatch's long and short names.
const KNOWN: &[&str] = &[
    "J",
    "job-name",
    "p",
    "partition",
    "A",
    "account",
    "q",
    "qos",
    "reservation",
    "t",
    "time",
    "N",
    "nodes",
    "n",
    "ntasks",
    "c",
    "cpus-per-task",
    "mem",
    "mem-per-cpu",
    "gres",
    "C",
    "constraint",
    "D",
    "chdir",
    "o",
    "output",
    "e",
    "error",
    "comment",
    "d",
    "dependency",
    "a",
    "array",
    "nice",
];

fn known(key: &str) -> bool {
    KNOWN.contains(&key)
}

/// Sets one option unless the command line gave it; `false` for an unknown option.
fn set(args: &mut SubmitArgs, key: &str, value: &str) -> Result<bool, String> {
    fn text(slot: &mut Option<String>, value: &str) {
        if slot.is_none() {
            *slot = Some(value.to_string());
        }
    }
    fn number<T: std::str::FromStr>(
        slot: &mut Option<T>,
        key: &str,
        value: &str,
    ) -> Result<(), String> {
        if slot.is_none() {
            let n = value
                .parse()
                .map_err(|_| format!("#SBATCH --{key}={value}: not a number"))?;
            *slot = Some(n);
        }
        Ok(())
    }
    let bad = |e: String| format!("#SBATCH --{key}={value}: {e}");
    match key {
        "J" | "job-name" => text(&mut args.name, value),
        "p" | "partition" => text(&mut args.partition, value),
        "A" | "account" => text(&mut args.account, value),
        "q" | "qos" => text(&mut args.qos, value),
        "reservation" => text(&mut args.reservation, value),
        "gres" => text(&mut args.gres, value),
        "C" | "constraint" => text(&mut args.constraint, value),
        "D" | "chdir" => text(&mut args.chdir, value),
        "o" | "output" => text(&mut args.stdout, value),
        "e" | "error" => text(&mut args.stderr, value),
        "comment" => text(&mut args.comment, value),
        "d" | "dependency" => text(&mut args.dependency, value),
        "a" | "array" => text(&mut args.array, value),
        "N" | "nodes" => number(&mut args.nodes, key, value)?,
        "n" | "ntasks" => number(&mut args.ntasks, key, value)?,
        "c" | "cpus-per-task" => number(&mut args.cpus_per_task, key, value)?,
        "nice" => number(&mut args.nice, key, value)?,
        "t" | "time" => {
            if args.time.is_none() {
                args.time = Some(format::parse_time_limit(value).map_err(bad)?);
            }
        }
        // --mem and --mem-per-cpu exclude each other: the command line's choice wins.
        "mem" => {
            if args.mem.is_none() && args.mem_per_cpu.is_none() {
                args.mem = Some(format::parse_memory_mb(value).map_err(bad)?);
            }
        }
        "mem-per-cpu" => {
            if args.mem.is_none() && args.mem_per_cpu.is_none() {
                args.mem_per_cpu = Some(format::parse_memory_mb(value).map_err(bad)?);
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_client::Limit;

    const SCRIPT: &str = "#!/bin/bash
#SBATCH --job-name=\"my job\" -p debug
#SBATCH -t 1:00:00   # an hour
#SBATCH --mem 2G
#SBATCH -N2 --hold
## #SBATCH --account=commented-out

#SBATCH --mail-type=END
#SBATCHING is not a directive
hostname
#SBATCH --qos=too-late
";

    #[test]
    fn directives_before_the_first_command_only() {
        let lines = words(SCRIPT);
        assert_eq!(
            lines,
            vec![
                vec!["--job-name=my job", "-p", "debug"],
                vec!["-t", "1:00:00"],
                vec!["--mem", "2G"],
                vec!["-N2", "--hold"],
                vec!["--mail-type=END"],
            ]
        );
    }

    #[test]
    fn command_line_wins_and_unknown_options_are_reported() {
        let mut args = SubmitArgs {
            partition: Some("batch".into()),
            ..Default::default()
        };
        let ignored = apply(&mut args, &words(SCRIPT)).unwrap();
        assert_eq!(args.name.as_deref(), Some("my job"));
        assert_eq!(args.partition.as_deref(), Some("batch"));
        assert_eq!(args.time, Some(Limit::Value(60)));
        assert_eq!(args.mem, Some(2048));
        assert_eq!(args.nodes, Some(2));
        assert!(args.hold);
        assert_eq!(args.qos, None);
        assert_eq!(ignored.len(), 1, "{ignored:?}");
        assert!(ignored[0].contains("--mail-type=END"), "{ignored:?}");
    }

    #[test]
    fn bad_values_name_the_directive() {
        let mut args = SubmitArgs::default();
        let err = apply(&mut args, &[vec!["--nodes=two".into()]]).unwrap_err();
        assert!(err.contains("--nodes=two"), "{err}");
        let err = apply(&mut args, &[vec!["--time".into()]]).unwrap_err();
        assert!(err.contains("needs a value"), "{err}");
    }

    #[test]
    fn a_multibyte_short_option_is_not_cut_inside() {
        // Regression: `-é` panicked (a byte index inside the character).
        let mut args = SubmitArgs::default();
        let ignored = apply(&mut args, &words("#!/bin/sh\n#SBATCH -éx -ü\n")).unwrap();
        assert_eq!(ignored.len(), 2, "{ignored:?}");
        assert!(ignored[0].contains("-éx"), "{ignored:?}");
    }
}
