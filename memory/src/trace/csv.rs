//! The trace's CSV form: a writer and a validating reader, on the `csv`
//! crate (which does the quoting, line splitting and line counting).

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use super::{Trace, TraceRecord};
use crate::{
    AllocationId, Error, MemoryClass, Placement, Result, StreamId, TraceError, TraceFault,
};

/// The header line.
pub const HEADER: &str = "id,class,bytes,placement,stream,alloc_ns,free_ns";

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |e| {
        TraceError::Io {
            path: path.to_owned(),
            kind: e.kind(),
        }
        .into()
    }
}

/// A reading error of the `csv` crate as an I/O error (with an empty path;
/// [`Trace::read_file`] names the file): the underlying I/O error's kind,
/// or `InvalidData` for text that is not UTF-8.
fn csv_error(e: csv::Error) -> Error {
    let kind = match e.kind() {
        csv::ErrorKind::Io(io) => io.kind(),
        _ => io::ErrorKind::InvalidData,
    };
    TraceError::Io {
        path: Default::default(),
        kind,
    }
    .into()
}

fn malformed(line: usize, fault: TraceFault) -> Error {
    TraceError::Malformed { line, fault }.into()
}

fn number(field: &str, column: &'static str, line: usize) -> Result<u64> {
    if field.is_empty() || !field.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed(line, TraceFault::Number { column }));
    }
    field
        .parse()
        .map_err(|_| malformed(line, TraceFault::Number { column }))
}

fn placement(name: &str) -> Option<Placement> {
    Placement::ALL.into_iter().find(|p| p.name() == name)
}

fn parse_record(fields: &csv::StringRecord, line: usize) -> Result<TraceRecord> {
    let fields: Vec<&str> = fields.iter().collect();
    let [id, class, bytes, place, stream, alloc, free] = fields.as_slice() else {
        return Err(malformed(
            line,
            TraceFault::FieldCount {
                found: fields.len(),
            },
        ));
    };
    let record = TraceRecord {
        id: AllocationId(number(id, "id", line)?),
        class: class
            .parse::<MemoryClass>()
            .map_err(|_| malformed(line, TraceFault::Class))?,
        bytes: number(bytes, "bytes", line)?,
        placement: placement(place).ok_or_else(|| malformed(line, TraceFault::Placement))?,
        stream: stream
            .parse::<StreamId>()
            .map_err(|()| malformed(line, TraceFault::Stream))?,
        alloc_ns: number(alloc, "alloc_ns", line)?,
        free_ns: if free.is_empty() {
            None
        } else {
            Some(number(free, "free_ns", line)?)
        },
    };
    if record.bytes == 0 {
        return Err(malformed(line, TraceFault::ZeroBytes));
    }
    if record.free_ns.is_some_and(|f| f < record.alloc_ns) {
        return Err(malformed(line, TraceFault::FreeBeforeAlloc));
    }
    Ok(record)
}

impl Trace {
    /// Writes the trace as CSV: the [`HEADER`], then one line per record
    /// (`free_ns` empty for an allocation never freed).
    ///
    /// # Errors
    /// I/O errors of `out`.
    pub fn write_csv(&self, out: impl Write) -> io::Result<()> {
        let mut writer = csv::Writer::from_writer(out);
        writer.write_record(HEADER.split(','))?;
        for r in &self.records {
            writer.write_record([
                r.id.to_string(),
                r.class.to_string(),
                r.bytes.to_string(),
                r.placement.to_string(),
                r.stream.to_string(),
                r.alloc_ns.to_string(),
                r.free_ns.map(|f| f.to_string()).unwrap_or_default(),
            ])?;
        }
        writer.flush()
    }

    /// Writes the trace to a CSV file.
    ///
    /// # Errors
    /// [`TraceError::Io`].
    pub fn write_file(&self, path: &Path) -> Result<()> {
        let file = File::create(path).map_err(io_error(path))?;
        self.write_csv(BufWriter::new(file)).map_err(io_error(path))
    }

    /// Reads and validates CSV: the exact header, seven fields per line,
    /// known classes, placements and streams, non-negative integers, no
    /// zero sizes, frees not before allocations, unique ids. Blank lines are
    /// skipped and fields are trimmed.
    ///
    /// # Errors
    /// [`TraceError::Malformed`] with the 1-based line number;
    /// [`TraceError::Io`] (with an empty path) for read errors and text
    /// that is not UTF-8.
    pub fn read_csv(mut input: impl BufRead) -> Result<Self> {
        let mut text = String::new();
        input
            .read_to_string(&mut text)
            .map_err(io_error(Path::new("")))?;
        // `csv` counts records' lines without the blank ones; errors name the
        // line in the file, found from the record's byte offset.
        let newlines: Vec<usize> = text.match_indices('\n').map(|(at, _)| at).collect();
        // (A record's offset can point at the blank lines before it.)
        let line_at = |byte: u64| {
            let byte = usize::try_from(byte).unwrap_or(usize::MAX);
            let blank = text.get(byte..).map_or(0, |rest| {
                rest.len() - rest.trim_start_matches(['\r', '\n']).len()
            });
            newlines.partition_point(|&at| at < byte + blank) + 1
        };
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let mut rows = reader.records();
        let header = match rows.next() {
            None => return Err(malformed(1, TraceFault::Empty)),
            Some(row) => row.map_err(csv_error)?,
        };
        if !header.iter().eq(HEADER.split(',')) {
            return Err(malformed(1, TraceFault::Header));
        }
        let mut records = Vec::new();
        let mut ids = HashSet::new();
        for row in rows {
            let row = row.map_err(csv_error)?;
            let line = row.position().map_or(0, |p| line_at(p.byte()));
            let record = parse_record(&row, line)?;
            if !ids.insert(record.id) {
                return Err(malformed(line, TraceFault::DuplicateId));
            }
            records.push(record);
        }
        Ok(Self { records })
    }

    /// Reads and validates a CSV file.
    ///
    /// # Errors
    /// As [`Trace::read_csv`]; [`TraceError::Io`] naming the file.
    pub fn read_file(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(io_error(path))?;
        Self::read_csv(BufReader::new(file)).map_err(|e| match e {
            Error::Trace(TraceError::Io { kind, .. }) => TraceError::Io {
                path: path.to_owned(),
                kind,
            }
            .into(),
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Trace {
        Trace {
            records: vec![
                TraceRecord {
                    id: AllocationId(1),
                    class: MemoryClass::EvaluationKey,
                    bytes: 1 << 20,
                    placement: Placement::Managed,
                    stream: StreamId::Compute,
                    alloc_ns: 10,
                    free_ns: None,
                },
                TraceRecord {
                    id: AllocationId(2),
                    class: MemoryClass::Temporary,
                    bytes: 4096,
                    placement: Placement::DevicePool,
                    stream: StreamId::Copy,
                    alloc_ns: 20,
                    free_ns: Some(35),
                },
            ],
        }
    }

    #[test]
    fn round_trip() {
        let trace = sample();
        let mut text = Vec::new();
        trace.write_csv(&mut text).expect("write");
        let text = String::from_utf8(text).expect("utf-8");
        assert_eq!(
            text,
            "id,class,bytes,placement,stream,alloc_ns,free_ns\n\
             1,evaluation_key,1048576,managed,compute,10,\n\
             2,temporary,4096,device_pool,copy,20,35\n"
        );
        assert_eq!(Trace::read_csv(text.as_bytes()), Ok(trace));
    }

    #[test]
    fn malformed_input_is_a_typed_error_with_its_line() {
        let h = HEADER;
        let cases: Vec<(String, usize, TraceFault)> = vec![
            (String::new(), 1, TraceFault::Empty),
            ("id,class,bytes\n".into(), 1, TraceFault::Header),
            (
                format!("{h}\n1,temporary,8,device_pool,compute,1\n"),
                2,
                TraceFault::FieldCount { found: 6 },
            ),
            (
                format!("{h}\n1,temporary,-8,device_pool,compute,1,2\n"),
                2,
                TraceFault::Number { column: "bytes" },
            ),
            (
                format!(
                    "{h}\n1,temporary,8,device_pool,compute,1,2\nx,temporary,8,host,compute,1,2\n"
                ),
                3,
                TraceFault::Number { column: "id" },
            ),
            (
                format!("{h}\n1,keys,8,device_pool,compute,1,2\n"),
                2,
                TraceFault::Class,
            ),
            (
                format!("{h}\n1,temporary,8,gpu,compute,1,2\n"),
                2,
                TraceFault::Placement,
            ),
            (
                format!("{h}\n1,temporary,8,host,side,1,2\n"),
                2,
                TraceFault::Stream,
            ),
            (
                format!("{h}\n1,temporary,0,host,compute,1,2\n"),
                2,
                TraceFault::ZeroBytes,
            ),
            (
                format!("{h}\n1,temporary,8,host,compute,5,2\n"),
                2,
                TraceFault::FreeBeforeAlloc,
            ),
            (
                format!("{h}\n1,temporary,8,host,compute,1,2\n\n1,temporary,8,host,compute,3,4\n"),
                4,
                TraceFault::DuplicateId,
            ),
            (
                format!("{h}\n1,temporary,8,host,compute,1,99999999999999999999999\n"),
                2,
                TraceFault::Number { column: "free_ns" },
            ),
        ];
        for (text, line, fault) in cases {
            assert_eq!(
                Trace::read_csv(text.as_bytes()),
                Err(TraceError::Malformed { line, fault }.into()),
                "{text:?}"
            );
        }
        // Text that is not UTF-8 is a read error, not a panic.
        assert_eq!(
            Trace::read_csv(&b"id,class\xff\n"[..]),
            Err(TraceError::Io {
                path: Default::default(),
                kind: io::ErrorKind::InvalidData
            }
            .into())
        );
    }

    /// Traces written by the hand-written writer before the `csv` crate
    /// (spaces after commas and CRLF line ends included) still read.
    #[test]
    fn earlier_traces_still_read() {
        let text = "id,class,bytes,placement,stream,alloc_ns,free_ns\r\n\
                    1, evaluation_key, 1048576, managed, compute, 10,\r\n\
                    \r\n\
                    2,temporary,4096,device_pool,copy,20,35\r\n";
        assert_eq!(Trace::read_csv(text.as_bytes()), Ok(sample()));
    }

    #[test]
    fn files_round_trip_and_missing_files_name_the_path() {
        let dir = std::env::temp_dir().join(format!("hemem-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("t.csv");
        sample().write_file(&path).expect("write");
        assert_eq!(Trace::read_file(&path), Ok(sample()));
        let missing = dir.join("missing.csv");
        assert_eq!(
            Trace::read_file(&missing),
            Err(TraceError::Io {
                path: missing.clone(),
                kind: io::ErrorKind::NotFound
            }
            .into())
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
