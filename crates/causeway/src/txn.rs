//! `causeway txn`: one interactive transaction from the command line, as a
//! script (`-e 'r a b; w a=1; commit'`, or lines on standard input) or at a
//! prompt when standard input is a terminal.
//!
//! Statements, separated by `;` or new lines:
//! - `r KEY…` (`read`): read keys at the transaction's snapshot (or its own
//!   writes); prints `KEY=VALUE` per key, `KEY (none)` where there is none;
//! - `w KEY=VALUE…` (`write`): buffer writes;
//! - `d KEY…` (`del`): buffer deletes;
//! - `commit`, `abort`: end the transaction (and the script).
//!
//! A script that ends without `commit` or `abort` is aborted and the command
//! fails: a transaction is committed only when asked to.

use crate::net::{ClientOpts, json_value, resolve_dc, runtime};
use bytes::Bytes;
use causeway_net::{ClusterConfig, Session, Transaction};
use causeway_protocols::with_protocol;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

type Error = Box<dyn std::error::Error>;

/// One statement of a transaction script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stmt {
    Read(Vec<Bytes>),
    Write(Vec<(Bytes, Bytes)>),
    Delete(Vec<Bytes>),
    Commit,
    Abort,
}

/// The statements of `text` (`;` or new lines between them; empty ones
/// skipped), or an error naming the statement that is wrong.
pub fn parse(text: &str) -> Result<Vec<Stmt>, String> {
    text.split([';', '\n']).map(str::trim).filter(|s| !s.is_empty()).map(parse_one).collect()
}

fn parse_one(stmt: &str) -> Result<Stmt, String> {
    let mut words = stmt.split_whitespace();
    let verb = words.next().unwrap_or_default();
    let args: Vec<&str> = words.collect();
    let keys = |what: &str| -> Result<Vec<Bytes>, String> {
        if args.is_empty() {
            return Err(format!("`{stmt}`: {what} needs at least one KEY"));
        }
        Ok(args.iter().map(|k| Bytes::copy_from_slice(k.as_bytes())).collect())
    };
    let none = |s: Stmt| if args.is_empty() { Ok(s) } else { Err(format!("`{stmt}`: {verb} takes no arguments")) };
    match verb.to_ascii_lowercase().as_str() {
        "r" | "read" | "get" => keys("read").map(Stmt::Read),
        "d" | "del" | "delete" => keys("delete").map(Stmt::Delete),
        "w" | "write" | "set" => {
            if args.is_empty() {
                return Err(format!("`{stmt}`: write needs at least one KEY=VALUE"));
            }
            args.iter()
                .map(|a| match a.split_once('=') {
                    Some((k, v)) if !k.is_empty() => {
                        Ok((Bytes::copy_from_slice(k.as_bytes()), Bytes::copy_from_slice(v.as_bytes())))
                    }
                    _ => Err(format!("`{stmt}`: `{a}` is not KEY=VALUE")),
                })
                .collect::<Result<_, _>>()
                .map(Stmt::Write)
        }
        "commit" => none(Stmt::Commit),
        "abort" | "rollback" => none(Stmt::Abort),
        other => Err(format!("`{stmt}`: unknown statement `{other}` (r KEY…, w KEY=VALUE…, d KEY…, commit, abort)")),
    }
}

/// Where the statements come from.
pub enum Source {
    Script(String),
    /// Standard input: a prompt per statement when it is a terminal.
    Stdin,
}

/// Run one transaction on the cluster `opts` names.
pub fn run(opts: &ClientOpts, source: Source) -> Result<(), Error> {
    let cluster = Arc::new(ClusterConfig::load(&opts.config)?.validate()?);
    let dc = resolve_dc(&cluster, &opts.dc)?;
    // A script is parsed whole first: a typo fails before anything runs.
    let script = match &source {
        Source::Script(text) => Some(parse(text)?),
        Source::Stdin if std::io::stdin().is_terminal() => None,
        Source::Stdin => Some(parse(&std::io::read_to_string(std::io::stdin())?)?),
    };
    let rt = runtime()?;
    rt.block_on(async {
        with_protocol!(cluster.protocol, P => {
            let mut s = Session::<P>::new(cluster.clone(), dc, std::process::id())?;
            s.timeout = opts.timeout;
            s.set_token(opts.token.clone());
            let txn = s.begin().await?;
            match script {
                Some(stmts) => run_script(txn, stmts, opts.json).await,
                None => run_prompt(txn, opts.json).await,
            }
        })
    })
}

async fn run_script<P: causeway_core::Protocol>(
    mut txn: Transaction<'_, P>,
    stmts: Vec<Stmt>,
    json: bool,
) -> Result<(), Error> {
    for stmt in stmts {
        match step(&mut txn, stmt, json).await? {
            Some(end) => return finish(txn, end, json).await,
            None => continue,
        }
    }
    txn.abort().await?;
    Err("the script ended without `commit` or `abort`: the transaction was aborted".into())
}

async fn run_prompt<P: causeway_core::Protocol>(mut txn: Transaction<'_, P>, json: bool) -> Result<(), Error> {
    let stdin = std::io::stdin();
    let mut line = String::new();
    eprintln!("transaction open: r KEY…, w KEY=VALUE…, d KEY…, then commit or abort");
    loop {
        eprint!("txn> ");
        std::io::stderr().flush()?;
        line.clear();
        if stdin.lock().read_line(&mut line)? == 0 {
            txn.abort().await?;
            return Err("end of input before `commit`: the transaction was aborted".into());
        }
        let stmts = match parse(&line) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{e}");
                continue;
            }
        };
        for stmt in stmts {
            if let Some(end) = step(&mut txn, stmt, json).await? {
                return finish(txn, end, json).await;
            }
        }
    }
}

/// Run a read or a write; `Some` for the statement that ends it.
async fn step<P: causeway_core::Protocol>(
    txn: &mut Transaction<'_, P>,
    stmt: Stmt,
    json: bool,
) -> Result<Option<Stmt>, Error> {
    let mut out = std::io::stdout().lock();
    match stmt {
        Stmt::Read(keys) => {
            let values = txn.read(keys.clone()).await?;
            if json {
                let map: serde_json::Map<String, serde_json::Value> = keys
                    .iter()
                    .zip(&values)
                    .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), json_value(v)))
                    .collect();
                writeln!(out, "{}", serde_json::json!({ "read": map }))?;
            } else {
                for (k, v) in keys.iter().zip(values) {
                    match v {
                        Some(v) => writeln!(out, "{}={}", String::from_utf8_lossy(k), String::from_utf8_lossy(&v))?,
                        None => writeln!(out, "{} (none)", String::from_utf8_lossy(k))?,
                    }
                }
            }
        }
        Stmt::Write(writes) => {
            for (k, v) in writes {
                txn.write(k, v)?;
            }
        }
        Stmt::Delete(keys) => {
            for k in keys {
                txn.delete(k)?;
            }
        }
        end @ (Stmt::Commit | Stmt::Abort) => return Ok(Some(end)),
    }
    out.flush()?;
    Ok(None)
}

async fn finish<P: causeway_core::Protocol>(txn: Transaction<'_, P>, end: Stmt, json: bool) -> Result<(), Error> {
    let writes = txn.writes().len();
    let committed = end == Stmt::Commit;
    if committed {
        txn.commit().await?;
    } else {
        txn.abort().await?;
    }
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::json!({ "committed": committed, "writes": writes }))?;
    } else if committed {
        writeln!(out, "committed ({writes} write{})", if writes == 1 { "" } else { "s" })?;
    } else {
        writeln!(out, "aborted")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn scripts_parse_and_name_what_is_wrong() {
        assert_eq!(
            parse("r a b; w a=1 c=; d b\ncommit").unwrap(),
            vec![
                Stmt::Read(vec![b("a"), b("b")]),
                Stmt::Write(vec![(b("a"), b("1")), (b("c"), b(""))]),
                Stmt::Delete(vec![b("b")]),
                Stmt::Commit
            ]
        );
        assert!(parse("r").unwrap_err().contains("needs at least one KEY"));
        assert!(parse("w a").unwrap_err().contains("`a` is not KEY=VALUE"));
        assert!(parse("commit now").unwrap_err().contains("takes no arguments"));
        assert!(parse("select a").unwrap_err().contains("unknown statement `select`"));
    }
}
