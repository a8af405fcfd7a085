//! `asof serve` (docs/SERVER.md) driven by clients asof did not write: the Rust Flight SQL client
//! of arrow-flight, and Python's ADBC driver with pyarrow (tests/python/flight_client.py).

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::Int64Type;
use arrow_flight::sql::client::FlightSqlServiceClient;
use futures::TryStreamExt;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

/// A running `asof serve`, stopped (SIGTERM) when dropped.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    /// Starts `asof serve` on `db` on a port the system picks, with `args`.
    fn start(db: &Path, args: &[&str]) -> Server {
        let bin = std::env::var("ASOF_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_asof").into());
        let mut child = Command::new(bin)
            .arg("--db")
            .arg(db)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start asof serve");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("asof serve: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_string();
        Server { child, addr }
    }

    /// Sends SIGTERM and waits: whether it stopped cleanly, and what it printed after starting.
    fn stop(mut self) -> (bool, String) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: a plain kill(2) of the child this struct started.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let mut rest = String::new();
        if let Some(out) = self.child.stdout.as_mut() {
            std::io::Read::read_to_string(out, &mut rest).unwrap();
        }
        let ok = self.child.wait().unwrap().success();
        (ok, rest)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn client(addr: &str) -> FlightSqlServiceClient<Channel> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    FlightSqlServiceClient::new(channel)
}

/// Runs `sql` and gathers its rows; an error as the client shows it.
async fn query(
    c: &mut FlightSqlServiceClient<Channel>,
    sql: &str,
) -> Result<Vec<RecordBatch>, String> {
    let info = c
        .execute(sql.to_string(), None)
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for ep in info.endpoint {
        let stream = c
            .do_get(ep.ticket.expect("a ticket"))
            .await
            .map_err(|e| e.to_string())?;
        out.extend(
            stream
                .try_collect::<Vec<_>>()
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(out)
}

/// The lines a statement answers (its `result` column).
async fn lines(c: &mut FlightSqlServiceClient<Channel>, sql: &str) -> Vec<String> {
    let batches = query(c, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut out = Vec::new();
    for b in batches {
        let col = b.column(0).as_string::<i32>();
        out.extend(col.iter().map(|v| v.unwrap().to_string()));
    }
    out
}

/// `(acct, balance)` rows of a result, in order.
fn balances(batches: &[RecordBatch]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for b in batches {
        let a = b.column(0).as_primitive::<Int64Type>();
        let v = b.column(1).as_primitive::<Int64Type>();
        out.extend((0..b.num_rows()).map(|i| (a.value(i), v.value(i))));
    }
    out
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}

const ACCOUNTS: i64 = 10;

/// The balances (`(acct, balance)`, by account) the writer left at each version.
type Recorded = BTreeMap<u64, Vec<(i64, i64)>>;

/// Sixteen readers ask for the whole table, now and at a version, while one writer moves money
/// between accounts (two rows per commit, the total unchanged): every answer is the table at
/// one version, as the writer recorded it, and none fails. With `ASOF_LOAD_SECS` the load runs
/// longer and its figures are printed (`-- --nocapture`).
#[test]
fn sixteen_readers_see_whole_commits_while_one_client_ingests() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--sessions", "8"]);
    let secs: f64 = std::env::var("ASOF_LOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let rt = runtime();
    rt.block_on(async {
        let mut w = client(&server.addr).await;
        let initial: Vec<String> = (0..ACCOUNTS).map(|a| format!("({a}, 100, 0)")).collect();
        lines(
            &mut w,
            &format!(
                "CREATE TABLE moves (acct BIGINT, balance BIGINT, seq BIGINT);
                 INSERT INTO moves VALUES {};
                 CREATE OR REFRESH STREAMING TABLE accounts FLOW AUTO CDC FROM stream(moves) KEYS (acct)
                   SEQUENCE BY seq COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 1",
                initial.join(", ")
            ),
        )
        .await;
        let start: Vec<(i64, i64)> = (0..ACCOUNTS).map(|a| (a, 100)).collect();
        let recorded: Arc<Mutex<Recorded>> =
            Arc::new(Mutex::new(BTreeMap::from([(1, start.clone())])));
        let latest = Arc::new(AtomicU64::new(1));
        let done = Arc::new(AtomicBool::new(false));

        let mut readers = Vec::new();
        for r in 0..16u64 {
            let (addr, recorded, latest, done) =
                (server.addr.clone(), recorded.clone(), latest.clone(), done.clone());
            readers.push(tokio::spawn(async move {
                let mut c = client(&addr).await;
                let mut latencies = Vec::new();
                let mut i = r;
                while !done.load(Ordering::Relaxed) {
                    i += 1;
                    // Now: some version the writer recorded, or one it is about to.
                    let t = Instant::now();
                    let now = balances(
                        &query(&mut c, "SELECT acct, balance FROM accounts ORDER BY acct")
                            .await
                            .expect("a query now"),
                    );
                    latencies.push(t.elapsed());
                    assert_eq!(now.iter().map(|r| r.1).sum::<i64>(), 100 * ACCOUNTS, "{now:?}");
                    // As of a version: exactly as recorded.
                    let v = 1 + i % latest.load(Ordering::Relaxed);
                    let t = Instant::now();
                    let then = balances(
                        &query(
                            &mut c,
                            &format!("SELECT acct, balance FROM accounts VERSION AS OF {v} ORDER BY acct"),
                        )
                        .await
                        .expect("a query as of a version"),
                    );
                    latencies.push(t.elapsed());
                    let want = recorded.lock().unwrap().get(&v).cloned();
                    assert_eq!(Some(then), want, "version {v}");
                }
                latencies
            }));
        }

        // The writer: a move of `x` from one account to another per commit.
        let started = Instant::now();
        let mut state = start;
        let mut commits = 0u64;
        let mut seq = 1;
        while started.elapsed().as_secs_f64() < secs {
            let (from, to) = ((seq % ACCOUNTS) as usize, ((seq * 7 + 3) % ACCOUNTS) as usize);
            if from == to {
                seq += 1;
                continue;
            }
            let x = seq % 5 + 1;
            state[from].1 -= x;
            state[to].1 += x;
            let out = lines(
                &mut w,
                &format!(
                    "INSERT INTO moves VALUES ({from}, {}, {seq}), ({to}, {}, {seq}); REFRESH STREAMING TABLE accounts",
                    state[from].1, state[to].1
                ),
            )
            .await;
            let version: u64 = out
                .iter()
                .find_map(|l| l.split("commit ").nth(1))
                .and_then(|s| s.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no commit in {out:?}"));
            recorded.lock().unwrap().insert(version, state.clone());
            latest.store(version, Ordering::Relaxed);
            commits += 1;
            seq += 1;
        }
        let elapsed = started.elapsed().as_secs_f64();
        done.store(true, Ordering::Relaxed);
        let mut latencies = Vec::new();
        for r in readers {
            latencies.extend(r.await.expect("a reader failed"));
        }
        latencies.sort();
        let p = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
        println!(
            "16 readers, 1 writer, {elapsed:.1} s: {} queries ({:.0}/s), p50 {:?}, p99 {:?}; {commits} commits of 2 events ({:.1} commits/s)",
            latencies.len(),
            latencies.len() as f64 / elapsed,
            p(0.5),
            p(0.99),
            commits as f64 / elapsed
        );
        assert!(commits >= 3, "{commits} commits");
        assert!(latencies.len() >= 32, "{} queries", latencies.len());
    });
    let (ok, rest) = server.stop();
    assert!(ok && rest.contains("asof serve: stopped"), "{rest}");
}

#[test]
fn statements_errors_and_prepared_parameters_through_the_rust_client() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    runtime().block_on(async {
        let mut c = client(&server.addr).await;
        let out = lines(
            &mut c,
            "CREATE TABLE ev (id BIGINT, v STRING, seq BIGINT);
             INSERT INTO ev VALUES (1, 'a', 1), (2, 'b', 1);
             CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(ev) KEYS (id)
               SEQUENCE BY seq COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 2",
        )
        .await;
        assert_eq!(
            out.last().unwrap(),
            "flow t into t: commit 1 read 2 events, upserted 2 rows"
        );
        // An update with a count: unknown for statements (-1).
        let n = c
            .execute_update("UPDATE t SET v = 'z' WHERE id = 2".into(), None)
            .await
            .unwrap();
        assert_eq!(n, -1);

        // A prepared query, run with two sets of parameters.
        let mut p = c
            .prepare(
                "SELECT id, v FROM t WHERE id = ? AND __END_AT IS NULL".into(),
                None,
            )
            .await
            .unwrap();
        for (id, want) in [(1i64, "a"), (2, "z")] {
            let params = RecordBatch::try_from_iter([(
                "p",
                Arc::new(Int64Array::from(vec![id])) as Arc<dyn Array>,
            )])
            .unwrap();
            p.set_parameters(params).unwrap();
            let info = p.execute().await.unwrap();
            let ticket = info.endpoint[0].ticket.clone().unwrap();
            let batches: Vec<RecordBatch> =
                c.do_get(ticket).await.unwrap().try_collect().await.unwrap();
            let v = batches[0].column(1).as_string::<i32>().value(0).to_string();
            assert_eq!((batches[0].num_rows(), v.as_str()), (1, want));
        }
        p.close().await.unwrap();

        // A negative value after a minus is a value: `2-?` with -1 must not comment out the rest.
        let mut p = c
            .prepare(
                "SELECT count(*) FROM t WHERE id = 2-? AND v = 'nope'".into(),
                None,
            )
            .await
            .unwrap();
        assert_eq!(p.parameter_schema().unwrap().fields().len(), 1);
        p.set_parameters(
            RecordBatch::try_from_iter([(
                "p",
                Arc::new(Int64Array::from(vec![-1])) as Arc<dyn Array>,
            )])
            .unwrap(),
        )
        .unwrap();
        let info = p.execute().await.unwrap();
        let batches: Vec<RecordBatch> = c
            .do_get(info.endpoint[0].ticket.clone().unwrap())
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(batches[0].column(0).as_primitive::<Int64Type>().value(0), 0);

        // A prepared statement that changes something, once per row of its parameters.
        let mut ins = c
            .prepare("INSERT INTO ev VALUES (?, ?, 2)".into(), None)
            .await
            .unwrap();
        let params = RecordBatch::try_from_iter([
            (
                "id",
                Arc::new(Int64Array::from(vec![3, 4])) as Arc<dyn Array>,
            ),
            (
                "v",
                Arc::new(StringArray::from(vec!["c", "d"])) as Arc<dyn Array>,
            ),
        ])
        .unwrap();
        ins.set_parameters(params).unwrap();
        ins.execute_update().await.unwrap();
        lines(&mut c, "REFRESH STREAMING TABLE t").await;
        let rows = query(&mut c, "SELECT count(*) FROM t WHERE __END_AT IS NULL")
            .await
            .unwrap();
        assert_eq!(rows[0].column(0).as_primitive::<Int64Type>().value(0), 4);

        // Errors: the CLI's message, a status code that says what kind.
        let e = query(&mut c, "SELECT * FROM nowhere")
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("nowhere"), "{e}");
        let e = query(&mut c, "DESCRIBE HISTORY gone")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Some requested entity was not found") && e.contains("gone"),
            "{e}"
        );
    });
}

#[test]
fn a_token_is_required_beyond_loopback_and_checked_on_every_call() {
    let dir = tempfile::tempdir().unwrap();
    // Beyond loopback without a token: refused, saying why.
    let out = Command::new(env!("CARGO_BIN_EXE_asof"))
        .arg("--db")
        .arg(dir.path())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env_remove("ASOF_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("give a bearer token"), "{err}");

    // Nor with an empty token, which a client sending none would match.
    let out = Command::new(env!("CARGO_BIN_EXE_asof"))
        .arg("--db")
        .arg(dir.path())
        .args(["serve", "--listen", "0.0.0.0:0", "--token", " "])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the bearer token (--token or ASOF_TOKEN) is empty"),
        "{err}"
    );

    let server = Server::start(dir.path(), &["--token", "s3cret"]);
    runtime().block_on(async {
        let mut c = client(&server.addr).await;
        let e = query(&mut c, "SELECT 1").await.unwrap_err().to_string();
        assert!(
            e.contains("authentication credentials") && e.contains("bearer token"),
            "{e}"
        );
        c.set_token("wrong".into());
        assert!(query(&mut c, "SELECT 1").await.is_err());
        c.set_token("s3cret".into());
        assert_eq!(query(&mut c, "SELECT 1").await.unwrap()[0].num_rows(), 1);
        // A handshake with the token as password hands out the bearer header.
        let mut h = client(&server.addr).await;
        h.handshake("anyone", "s3cret").await.unwrap();
        assert_eq!(h.token().map(String::as_str), Some("s3cret"));
        assert_eq!(query(&mut h, "SELECT 1").await.unwrap()[0].num_rows(), 1);
        let mut bad = client(&server.addr).await;
        assert!(bad.handshake("anyone", "guess").await.is_err());
    });
}

#[test]
fn tls_with_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        // A server's own certificate, not an authority's: rustls refuses a CA as a server.
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-addext", "extendedKeyUsage=serverAuth"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl makes the test's certificate");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let db = dir.path().join("db");
    let server = Server::start(
        &db,
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    runtime().block_on(async {
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(std::fs::read(&cert).unwrap()))
            .domain_name("localhost");
        let channel = Endpoint::from_shared(format!("https://localhost:{port}"))
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut c = FlightSqlServiceClient::new(channel);
        assert_eq!(query(&mut c, "SELECT 42").await.unwrap()[0].num_rows(), 1);
        // Plain text is not served.
        let mut plain = client(&format!("localhost:{port}")).await;
        assert!(query(&mut plain, "SELECT 1").await.is_err());
    });
}

#[test]
fn sigterm_lets_the_commit_in_flight_land_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let addr = server.addr.clone();
    let rt = runtime();
    rt.block_on(async {
        let mut c = client(&addr).await;
        lines(
            &mut c,
            "CREATE TABLE big (id BIGINT, seq BIGINT);
             CREATE OR REFRESH STREAMING TABLE t FLOW AUTO CDC FROM stream(big) KEYS (id)
               SEQUENCE BY seq STORED AS SCD TYPE 1",
        )
        .await;
    });
    // A statement that runs a while, and SIGTERM while it does: the server stops once it has
    // run. Its answer is fetched by a second call (`DoGet`), which a stopped server cannot
    // answer; what matters is that the commit landed whole.
    let mut c = rt.block_on(client(&addr));
    let statement = rt.spawn(async move {
        query(
            &mut c,
            "INSERT INTO big SELECT value AS id, 1 AS seq FROM generate_series(1, 100000);
             REFRESH STREAMING TABLE t",
        )
        .await
    });
    std::thread::sleep(Duration::from_millis(500));
    let (ok, rest) = server.stop();
    assert!(ok && rest.contains("asof serve: stopped"), "{rest}");
    let _ = rt.block_on(statement).expect("the client ran");
    let (ok, out, err) = common::run_asof(
        dir.path(),
        &[
            "sql",
            "SELECT count(*) AS n FROM t; SELECT count(*) AS n FROM big",
        ],
    );
    assert!(ok, "{out}{err}");
    assert_eq!(out.matches("| 100000 |").count(), 2, "{out}");
}

#[test]
fn a_python_adbc_client_queries_changes_and_binds_parameters() {
    let python = common::python();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/flight_client.py");
    for token in [None, Some("py-t0ken")] {
        let dir = tempfile::tempdir().unwrap();
        let args: Vec<&str> = token.map_or(vec![], |t| vec!["--token", t]);
        let server = Server::start(dir.path(), &args);
        let mut run = Command::new(&python);
        run.arg(script)
            .env("ASOF_FLIGHT_URI", format!("grpc://{}", server.addr));
        if let Some(t) = token {
            run.env("ASOF_FLIGHT_TOKEN", t);
        }
        let out = run.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.trim_end().ends_with("all ok"),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A query's rows are computed as the client's `DoGet` reads them: `GetFlightInfo` answers
/// before any row is computed (an unknown total, -1), a large result arrives in many batches, and
/// an error at a late row reaches the client after the rows before it, not from
/// `GetFlightInfo`.
#[test]
fn a_query_streams_its_rows_to_the_do_get() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    runtime().block_on(async {
        let mut c = client(&server.addr).await;
        lines(
            &mut c,
            "CREATE TABLE big AS SELECT value AS id FROM generate_series(1, 200000)",
        )
        .await;
        let info = c
            .execute("SELECT id FROM big".to_string(), None)
            .await
            .unwrap();
        assert_eq!(info.total_records, -1);
        let ticket = info.endpoint[0].ticket.clone().expect("a ticket");
        let batches: Vec<RecordBatch> =
            c.do_get(ticket).await.unwrap().try_collect().await.unwrap();
        assert!(batches.len() > 1, "{} batches", batches.len());
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 200_000);
        // Division by zero at id 150,000: the batches before it come first.
        let info = c
            .execute(
                "SELECT id, 10 / (id - 150000) AS x FROM big".to_string(),
                None,
            )
            .await
            .expect("planned, not yet computed");
        let ticket = info.endpoint[0].ticket.clone().expect("a ticket");
        let mut stream = c.do_get(ticket).await.unwrap();
        let mut before = 0;
        let error = loop {
            match stream.try_next().await {
                Ok(Some(b)) => before += b.num_rows(),
                Ok(None) => panic!("no error after {before} rows"),
                Err(e) => break e.to_string(),
            }
        };
        assert!(before > 0, "{error}");
        assert!(error.to_lowercase().contains("divide by zero"), "{error}");
        // The statement that failed changed nothing, and the server goes on.
        let out = query(&mut c, "SELECT count(*) FROM big").await.unwrap();
        assert_eq!(out[0].num_rows(), 1);
    });
    let (clean, _) = server.stop();
    assert!(clean);
}
