//! The Flight SQL service: statements and prepared statements, run by [`Sessions`], results
//! streamed as Arrow batches; the tables listed for clients that browse.

use std::pin::Pin;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, CommandGetCatalogs, CommandGetDbSchemas,
    CommandGetSqlInfo, CommandGetTables, CommandPreparedStatementQuery,
    CommandPreparedStatementUpdate, CommandStatementQuery, CommandStatementUpdate,
    DoPutPreparedStatementResult, ProstMessageExt, SqlInfo, TicketStatementQuery,
};
use arrow_flight::{
    FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse, Ticket,
};
use futures::{stream, Stream, TryStreamExt};
use prost::Message;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};

use crate::auth::{Auth, AUTHORIZATION};
use crate::results::{Handle, Held, Prepared, Rows};
use crate::sessions::{Ran, Sessions};
use crate::status::status;
use asof_query::sql::{full_name, full_schema_name, BatchStream, Results};
use asof_query::table_arrow_schema;

/// The catalog listed even when no table is in it (where `asof sql` puts a table named alone).
const CATALOG: &str = "main";

pub(crate) struct Service {
    pub sessions: Arc<Sessions>,
    pub held: Held,
    pub auth: Auth,
    pub info: SqlInfoData,
}

impl Service {
    pub(crate) fn new(sessions: Sessions, auth: Auth) -> Service {
        let mut info = SqlInfoDataBuilder::new();
        info.append(SqlInfo::FlightSqlServerName, "asof");
        info.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
        info.append(SqlInfo::FlightSqlServerArrowVersion, "1.3");
        info.append(SqlInfo::FlightSqlServerReadOnly, false);
        Service {
            sessions: Arc::new(sessions),
            held: Held::default(),
            auth,
            info: info.build().expect("static server information"),
        }
    }

    /// Runs `sql` (with `params`), holds its result, and describes it: its schema and the
    /// ticket that fetches it.
    async fn flight_info(
        &self,
        sql: String,
        params: Option<RecordBatch>,
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        // A query's rows are read once, one row of parameters at a time.
        if params.as_ref().is_some_and(|p| p.num_rows() > 1) {
            return Err(Status::invalid_argument(
                "a query takes one row of parameters; run it once for each row",
            ));
        }
        let ran = self.sessions.run(sql, params, Results::Streamed).await?;
        let (schema, rows) = ran.into_rows();
        // A stream's rows are counted by nobody before its DoGet: -1, unknown.
        let total = match &rows {
            Rows::Batches(batches) => batches.iter().map(|b| b.num_rows() as i64).sum(),
            Rows::Stream(_) => -1,
        };
        let handle = self.held.put_result(schema.clone(), rows)?;
        let ticket = TicketStatementQuery {
            statement_handle: self.held.bytes(handle).into(),
        };
        let endpoint =
            FlightEndpoint::new().with_ticket(Ticket::new(ticket.as_any().encode_to_vec()));
        let info = FlightInfo::new()
            .try_with_schema(&schema)
            .map_err(|e| Status::internal(e.to_string()))?
            .with_endpoint(endpoint)
            .with_descriptor(descriptor)
            .with_total_records(total)
            .with_ordered(true);
        Ok(Response::new(info))
    }

    /// The number a statement reports as the rows it changed: unknown (-1) unless it was a query.
    async fn update(&self, sql: String, params: Option<RecordBatch>) -> Result<i64, Status> {
        Ok(
            match self.sessions.run(sql, params, Results::Collected).await? {
                Ran::Rows(_, Rows::Batches(batches)) => {
                    batches.iter().map(|b| b.num_rows() as i64).sum()
                }
                Ran::Rows(_, Rows::Stream(_)) => -1,
                Ran::Done(_) => -1,
            },
        )
    }

    /// The parameters a client sends with `DoPut`, as one batch.
    async fn params(
        request: Request<PeekableFlightDataStream>,
    ) -> Result<Option<RecordBatch>, Status> {
        // A message with only the descriptor (what an update sends when its parameters were
        // bound before) holds no data.
        let data = request
            .into_inner()
            .map_err(FlightError::from)
            .try_filter(|d| std::future::ready(!d.data_header.is_empty()));
        let stream = FlightRecordBatchStream::new_from_flight_data(data);
        let batches: Vec<RecordBatch> = stream.try_collect().await.map_err(Status::from)?;
        let Some(first) = batches.first() else {
            return Ok(None);
        };
        let batch = arrow::compute::concat_batches(&first.schema(), &batches)
            .map_err(|e| Status::invalid_argument(format!("the parameters: {e}")))?;
        Ok(Some(batch))
    }

    fn prepared(&self, handle: &[u8]) -> Result<(Handle, Prepared), Status> {
        let h = self
            .held
            .handle_of(handle)
            .ok_or_else(|| Status::invalid_argument("not a prepared statement of this server"))?;
        let p = self.held.prepared(h).ok_or_else(|| {
            Status::not_found("no such prepared statement: it was closed, or the server restarted")
        })?;
        Ok((h, p))
    }
}

type DoGetStream = <Service as FlightService>::DoGetStream;

/// Streams `batches` as Flight data.
fn stream_batches(schema: SchemaRef, batches: Vec<RecordBatch>) -> Response<DoGetStream> {
    let stream = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .build(stream::iter(batches.into_iter().map(Ok)))
        .map_err(Status::from);
    Response::new(Box::pin(stream))
}

/// A query's rows to a `DoGet`, computed a batch at a time as the client reads them
/// ([`Sessions::next_batch`]). An error (a panic too) ends the stream with it; a client that goes
/// away stops the query.
fn stream_rows(
    sessions: Arc<Sessions>,
    schema: SchemaRef,
    rows: BatchStream,
) -> Response<DoGetStream> {
    let batches = stream::unfold(Some(rows), move |rows| {
        let sessions = sessions.clone();
        async move {
            match sessions.next_batch(rows?).await {
                Ok((rows, Some(batch))) => Some((Ok(batch), Some(rows))),
                Ok((_, None)) => None,
                Err(e) => Some((Err(FlightError::Tonic(Box::new(e))), None)),
            }
        }
    });
    let stream = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .build(batches)
        .map_err(Status::from);
    Response::new(Box::pin(stream))
}

#[tonic::async_trait]
impl FlightSqlService for Service {
    type FlightService = Service;

    async fn do_handshake(
        &self,
        _request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<
        Response<Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>>,
        Status,
    > {
        // The credentials were checked by the interceptor; the answer carries the bearer header
        // the client sends from now on.
        let answer = HandshakeResponse {
            protocol_version: 0,
            payload: Default::default(),
        };
        let mut response: Response<
            Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>,
        > = Response::new(Box::pin(stream::iter([Ok(answer)])));
        if let Some(bearer) = self.auth.bearer() {
            let value = MetadataValue::try_from(bearer.as_str())
                .map_err(|_| Status::internal("the token is not a header value"))?;
            response.metadata_mut().insert(AUTHORIZATION, value);
        }
        Ok(response)
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.flight_info(query.query, None, request.into_inner())
            .await
    }

    async fn get_flight_info_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let (_, p) = self.prepared(&query.prepared_statement_handle)?;
        self.flight_info(p.sql, p.params, request.into_inner())
            .await
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let pending = self
            .held
            .handle_of(&ticket.statement_handle)
            .and_then(|h| self.held.take_result(h))
            .ok_or_else(|| {
                Status::not_found(
                    "no such result: it was read already, or not read within 10 minutes",
                )
            })?;
        Ok(match pending.rows {
            Rows::Batches(batches) => stream_batches(pending.schema, batches),
            Rows::Stream(rows) => stream_rows(self.sessions.clone(), pending.schema, rows),
        })
    }

    async fn do_put_statement_update(
        &self,
        query: CommandStatementUpdate,
        _request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        self.update(query.query, None).await
    }

    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        let (h, _) = self.prepared(&query.prepared_statement_handle)?;
        if let Some(params) = Self::params(request).await? {
            self.held.bind(h, params);
        }
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(self.held.bytes(h).into()),
        })
    }

    async fn do_put_prepared_statement_update(
        &self,
        query: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let (_, p) = self.prepared(&query.prepared_statement_handle)?;
        let params = Self::params(request).await?.or(p.params);
        self.update(p.sql, params).await
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        _request: Request<arrow_flight::Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        let parameters = crate::params::count(&query.query).map_err(Status::invalid_argument)?;
        let h = self.held.prepare(query.query);
        // One nullable string field per parameter, so that clients that size their parameters
        // by it (JDBC) can bind them; the values are written in as literals of the types the
        // client sends. The result's schema is known once the statement runs.
        let fields: Vec<arrow::datatypes::Field> = (1..=parameters)
            .map(|i| {
                arrow::datatypes::Field::new(
                    format!("${i}"),
                    arrow::datatypes::DataType::Utf8,
                    true,
                )
            })
            .collect();
        let parameter_schema = if fields.is_empty() {
            Default::default()
        } else {
            schema_bytes(&Schema::new(fields))?
        };
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: self.held.bytes(h).into(),
            dataset_schema: Default::default(),
            parameter_schema,
        })
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        _request: Request<arrow_flight::Action>,
    ) -> Result<(), Status> {
        if let Some(h) = self.held.handle_of(&query.prepared_statement_handle) {
            self.held.close(h);
        }
        Ok(())
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder(&self.info).schema();
        listing_info(&schema, query.as_any().encode_to_vec(), request)
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let builder = query.into_builder(&self.info);
        let schema = builder.schema();
        let batch = builder
            .build()
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(stream_batches(schema, vec![batch]))
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        listing_info(&schema, query.as_any().encode_to_vec(), request)
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let mut catalogs: Vec<String> = self.listing()?.into_iter().map(|t| t.0).collect();
        catalogs.push(CATALOG.to_string());
        catalogs.sort();
        catalogs.dedup();
        let mut builder = query.into_builder();
        for c in catalogs {
            builder.append(c);
        }
        let schema = builder.schema();
        let batch = builder
            .build()
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(stream_batches(schema, vec![batch]))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        listing_info(&schema, query.as_any().encode_to_vec(), request)
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let mut schemas: Vec<(String, String)> = self
            .listing()?
            .into_iter()
            .map(|(c, s, ..)| (c, s))
            .collect();
        for (s, _) in self
            .sessions
            .store()
            .schemas()
            .map_err(|e| status(&e.into()))?
        {
            schemas.push(full_schema_name(&s));
        }
        schemas.push((CATALOG.to_string(), "default".to_string()));
        schemas.sort();
        schemas.dedup();
        let mut builder = query.into_builder();
        for (c, s) in schemas {
            builder.append(c, s);
        }
        let schema = builder.schema();
        let batch = builder
            .build()
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(stream_batches(schema, vec![batch]))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        listing_info(&schema, query.as_any().encode_to_vec(), request)
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let mut builder = query.into_builder();
        for (catalog, schema, name, kind, columns) in self.listing()? {
            builder
                .append(catalog, schema, name, kind, &columns)
                .map_err(Status::from)?;
        }
        let schema = builder.schema();
        let batch = builder
            .build()
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(stream_batches(schema, vec![batch]))
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}

/// A schema as the IPC message Flight SQL carries it in.
fn schema_bytes(schema: &Schema) -> Result<prost::bytes::Bytes, Status> {
    let options = arrow::ipc::writer::IpcWriteOptions::default();
    let message: arrow_flight::IpcMessage = arrow_flight::SchemaAsIpc::new(schema, &options)
        .try_into()
        .map_err(|e: arrow::error::ArrowError| Status::internal(e.to_string()))?;
    Ok(message.0)
}

/// A listing's flight: its schema, and a ticket that is the command itself.
fn listing_info(
    schema: &Schema,
    command: Vec<u8>,
    request: Request<FlightDescriptor>,
) -> Result<Response<FlightInfo>, Status> {
    let info = FlightInfo::new()
        .try_with_schema(schema)
        .map_err(|e| Status::internal(e.to_string()))?
        .with_endpoint(FlightEndpoint::new().with_ticket(Ticket::new(command)))
        .with_descriptor(request.into_inner());
    Ok(Response::new(info))
}

/// A table as listed: its catalog, schema, name, kind and columns.
type Listed = (String, String, String, &'static str, Schema);

impl Service {
    /// Every table, source table and view, with its columns (a view's are known once it is
    /// planned, and listed empty).
    fn listing(&self) -> Result<Vec<Listed>, Status> {
        let store = self.sessions.store();
        let err = |e: asof_storage::Error| status(&e.into());
        let mut out = Vec::new();
        for t in store.tables().map_err(err)? {
            let columns = table_arrow_schema(&store.schema(&t).map_err(err)?);
            let (c, s, n) = full_name(&t);
            out.push((c, s, n, "TABLE", columns.as_ref().clone()));
        }
        for t in store.sources().map_err(err)? {
            let columns = store.source_schema(&t).map_err(err)?;
            let (c, s, n) = full_name(&t);
            out.push((c, s, n, "TABLE", columns.as_ref().clone()));
        }
        for (v, _) in store.views().map_err(err)? {
            let (c, s, n) = full_name(&v);
            out.push((c, s, n, "VIEW", Schema::empty()));
        }
        out.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
        Ok(out)
    }
}
