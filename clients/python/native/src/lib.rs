//! `ctx_native`: ctx inside a Python process. A thin binding of
//! [`ctx_embedded`]: it converts values and calls the facade, and holds no
//! logic of its own. `ctx_client.Embedded` and `ctx_client.AsyncEmbedded`
//! (clients/python/src/ctx_client/embedded.py) send the clients' generated
//! calls through it.
//!
//! The interpreter's lock is released around every call into the facade
//! (`Python::detach`); an async call runs on the facade's runtime and its
//! answer is handed to the event loop (`loop.call_soon_threadsafe`) from a
//! thread of that runtime's blocking pool, never from one of its async
//! workers, so waiting for the lock never holds up a store call.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use ctx_embedded::{Embedded, Request, Response};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// An answer as Python takes it: (status, [(header, value)], body).
type Answer<'py> = (u16, Vec<(String, String)>, Bound<'py, PyBytes>);

/// A data directory opened in this process.
#[pyclass(frozen, module = "ctx_native")]
struct Native {
    inner: Arc<Embedded>,
}

fn request(method: String, target: String, headers: Vec<(String, String)>, body: &[u8]) -> Request {
    Request {
        method,
        target,
        headers,
        body: Bytes::copy_from_slice(body),
    }
}

fn answer(py: Python<'_>, r: Response) -> Answer<'_> {
    (r.status, r.headers, PyBytes::new(py, &r.body))
}

#[pymethods]
impl Native {
    /// Opens (creating it if needed) the data directory `path` as
    /// `tenant` (the directory's first tenant, `default`, when None).
    #[new]
    #[pyo3(signature = (path, tenant=None))]
    fn new(py: Python<'_>, path: PathBuf, tenant: Option<String>) -> PyResult<Self> {
        let opened = py.detach(|| Embedded::open(path, tenant.as_deref()));
        match opened {
            Ok(e) => Ok(Native { inner: Arc::new(e) }),
            Err(e) if e.kind == ctx_embedded::ErrorKind::Invalid => {
                Err(PyValueError::new_err(e.to_string()))
            }
            Err(e) => Err(PyOSError::new_err(e.to_string())),
        }
    }

    /// The data directory.
    #[getter]
    fn data(&self) -> PathBuf {
        self.inner.data().to_owned()
    }

    /// The tenant it acts as.
    #[getter]
    fn tenant(&self) -> String {
        self.inner.tenant().to_string()
    }

    /// Answers one request: (status, headers, body). Blocks this thread,
    /// not the interpreter.
    fn call<'py>(
        &self,
        py: Python<'py>,
        method: String,
        target: String,
        headers: Vec<(String, String)>,
        body: &[u8],
    ) -> Answer<'py> {
        let req = request(method, target, headers, body);
        let inner = &self.inner;
        let r = py.detach(move || inner.call(req));
        answer(py, r)
    }

    /// Starts one request on ctx's own runtime and returns at once; when it
    /// is answered, `loop.call_soon_threadsafe(done, future, status,
    /// headers, body)` hands the answer to the event loop.
    #[allow(clippy::too_many_arguments)] // the request, and where its answer goes
    fn call_async(
        &self,
        method: String,
        target: String,
        headers: Vec<(String, String)>,
        body: &[u8],
        event_loop: Py<PyAny>,
        done: Py<PyAny>,
        future: Py<PyAny>,
    ) {
        let req = request(method, target, headers, body);
        self.inner.call_then(req, move |r| {
            Python::attach(|py| {
                let (status, headers, body) = answer(py, r);
                // A loop closed meanwhile has no one to tell: the error is
                // the loop's to report, not this thread's.
                if let Err(e) = event_loop.call_method1(
                    py,
                    "call_soon_threadsafe",
                    (done, future, status, headers, body),
                ) {
                    e.print(py);
                }
            });
        });
    }

    /// Waits for cached results still being written (call before exiting).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let inner = &self.inner;
        py.detach(move || inner.flush())
            .map_err(|e| PyOSError::new_err(e.to_string()))
    }

    fn __repr__(&self) -> String {
        format!(
            "Native({:?}, tenant={:?})",
            self.inner.data(),
            self.inner.tenant().as_str()
        )
    }
}

#[pymodule]
fn ctx_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Native>()?;
    Ok(())
}
