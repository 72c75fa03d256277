//! Device selectors: CEL expressions over one `device` (its `driver`,
//! `attributes[domain][id]` and `capacity[domain][id]`), as
//! `k8s.io/dynamic-resource-allocation/cel` evaluates them, with
//! Kubernetes' `quantity()` library for capacities and `semver()` library
//! for versions (a `version` attribute is a semver, as there). Every
//! expression is bounded
//! before it runs: at most 10 KiB of source (the API's own limit), an
//! expression tree at most 100 deep (the evaluator recurses), and an
//! estimated cost of at most 1,000,000 (the API's `CELSelectorExpressionMaxCost`),
//! counted per node of the tree with each comprehension's body times the
//! most elements its range can have. A device has at most 32 attributes
//! and capacities, so the estimate bounds the work of every evaluation.

use std::any::Any;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::common::traits::{Container, Indexer, Iterable, Sizer};
use cel::common::types::{CelBool, CelInt, CelMap, CelMapKey, CelString, MAP_TYPE, Type};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::context::VariableResolver;
use cel::{Context, Env, ExecutionError, Program, Value};
use serde::{Deserialize, Serialize};

use super::{Attribute, Device, DeviceId};

/// Longest selector source (`CELSelectorExpressionMaxLength`).
pub const MAX_LENGTH: usize = 10 * 1024;
/// Deepest expression tree accepted.
pub const MAX_DEPTH: usize = 100;
/// Highest estimated cost accepted (`CELSelectorExpressionMaxCost`).
pub const MAX_COST: u64 = 1_000_000;
/// Most elements a range that is not a literal can have: a device's
/// attributes or capacities (`ResourceSliceMaxAttributesAndCapacitiesPerDevice`).
const MAX_RANGE: u64 = 32;

/// A device capacity, in thousandths of its unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Quantity(pub u64);

/// A selector that cannot be used, naming the expression and the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("selector {expression:?}: CEL compile error: {message}")]
    Compile { expression: String, message: String },
    #[error("selector {expression:?} is {length} bytes long, more than {MAX_LENGTH}")]
    TooLong { expression: String, length: usize },
    #[error("selector {expression:?} nests {depth} deep, more than {MAX_DEPTH}")]
    TooDeep { expression: String, depth: usize },
    #[error("selector {expression:?} has an estimated cost of {cost}, more than {MAX_COST}")]
    TooCostly { expression: String, cost: u64 },
    #[error("selector {expression:?} on device {device}: CEL runtime error: {message}")]
    Runtime {
        expression: String,
        device: String,
        message: String,
    },
}

/// A compiled selector.
#[derive(Debug, Clone)]
pub(crate) struct Selector {
    source: Arc<str>,
    program: Arc<Program>,
}

static QUANTITY: Type = Type::new_unspecified_type("kubernetes.Quantity");

impl Val for Quantity {
    fn get_type(&self) -> &Type {
        &QUANTITY
    }
    fn cel_type() -> &'static Type {
        &QUANTITY
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<Quantity>() == Some(self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(*self)
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for Quantity {}

fn quantity(text: &CelString<'_>) -> Result<Quantity, ExecutionError> {
    crate::quantity::parse(text.inner(), 1000)
        .map(Quantity)
        .map_err(|e| ExecutionError::function_error("quantity", e))
}
fn is_greater_than(this: &Quantity, other: &Quantity) -> CelBool {
    CelBool::from(this > other)
}
fn is_less_than(this: &Quantity, other: &Quantity) -> CelBool {
    CelBool::from(this < other)
}
fn compare_to(this: &Quantity, other: &Quantity) -> CelInt {
    CelInt::from(match this.cmp(other) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    })
}
fn as_integer(this: &Quantity) -> Result<CelInt, ExecutionError> {
    if !this.0.is_multiple_of(1000) {
        return Err(ExecutionError::function_error(
            "asInteger",
            "the quantity is not an integer",
        ));
    }
    i64::try_from(this.0 / 1000)
        .map(CelInt::from)
        .map_err(|e| ExecutionError::function_error("asInteger", e))
}

/// A semantic version (`kubernetes.Semver`): compared by precedence, so
/// build metadata does not count, as blang/semver's `Compare` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver(pub semver::Version);

static SEMVER: Type = Type::new_unspecified_type("kubernetes.Semver");

impl Val for Semver {
    fn get_type(&self) -> &Type {
        &SEMVER
    }
    fn cel_type() -> &'static Type {
        &SEMVER
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<Semver>()
            .is_some_and(|o| self.0.cmp_precedence(&o.0) == Ordering::Equal)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for Semver {}

/// `text` as a version; with `normalize`, a leading `v` dropped, leading
/// zeros dropped and a missing minor or patch taken as 0, as the library's
/// `normalizeAndParse`.
fn parse_semver(text: &str, normalize: bool) -> Result<semver::Version, String> {
    if !normalize {
        return semver::Version::parse(text).map_err(|e| e.to_string());
    }
    let text = text.strip_prefix('v').unwrap_or(text);
    let mut parts: Vec<String> = text.splitn(3, '.').map(str::to_string).collect();
    for p in &mut parts {
        if p.len() > 1 {
            let trimmed = p.trim_start_matches('0');
            *p = match trimmed.chars().next() {
                Some(c) if c.is_ascii_digit() => trimmed.to_string(),
                _ => format!("0{trimmed}"),
            };
        }
    }
    if parts.len() < 3 {
        if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
            return Err("short version cannot contain PreRelease/Build meta data".into());
        }
        parts.resize(3, "0".to_string());
    }
    semver::Version::parse(&parts.join(".")).map_err(|e| e.to_string())
}

fn semver_of(text: &CelString<'_>) -> Result<Semver, ExecutionError> {
    semver_normalized(text, &CelBool::from(false))
}
fn semver_normalized(text: &CelString<'_>, normalize: &CelBool) -> Result<Semver, ExecutionError> {
    parse_semver(text.inner(), *normalize.inner())
        .map(Semver)
        .map_err(|e| ExecutionError::function_error("semver", e))
}
fn is_semver(text: &CelString<'_>) -> CelBool {
    CelBool::from(parse_semver(text.inner(), false).is_ok())
}
fn is_semver_normalized(text: &CelString<'_>, normalize: &CelBool) -> CelBool {
    CelBool::from(parse_semver(text.inner(), *normalize.inner()).is_ok())
}
fn major(this: &Semver) -> Result<CelInt, ExecutionError> {
    part("major", this.0.major)
}
fn minor(this: &Semver) -> Result<CelInt, ExecutionError> {
    part("minor", this.0.minor)
}
fn patch(this: &Semver) -> Result<CelInt, ExecutionError> {
    part("patch", this.0.patch)
}
fn part(name: &str, n: u64) -> Result<CelInt, ExecutionError> {
    i64::try_from(n)
        .map(CelInt::from)
        .map_err(|e| ExecutionError::function_error(name, e))
}
fn semver_greater(this: &Semver, other: &Semver) -> CelBool {
    CelBool::from(this.0.cmp_precedence(&other.0) == Ordering::Greater)
}
fn semver_less(this: &Semver, other: &Semver) -> CelBool {
    CelBool::from(this.0.cmp_precedence(&other.0) == Ordering::Less)
}
fn semver_compare(this: &Semver, other: &Semver) -> CelInt {
    CelInt::from(match this.0.cmp_precedence(&other.0) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    })
}

/// The standard library, Kubernetes' quantity and semver functions, and
/// nothing else.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    let declared = (|| {
        env.add_type(QUANTITY.to_owned())?;
        cel::add_overload!(env, fn quantity: (CelString) -> Result<Quantity>)?;
        cel::add_member_overload!(env, fn is_greater_than: (Quantity, Quantity) -> CelBool)?;
        cel::add_member_overload!(env, fn is_less_than: (Quantity, Quantity) -> CelBool)?;
        cel::add_member_overload!(env, fn compare_to: (Quantity, Quantity) -> CelInt)?;
        cel::add_member_overload!(env, fn as_integer: (Quantity) -> Result<CelInt>)?;
        env.add_type(SEMVER.to_owned())?;
        cel::add_overload!(env, fn semver_of: (CelString) -> Result<Semver>, name = "semver")?;
        cel::add_overload!(
            env,
            fn semver_normalized: (CelString, CelBool) -> Result<Semver>,
            name = "semver"
        )?;
        cel::add_overload!(env, fn is_semver: (CelString) -> CelBool)?;
        cel::add_overload!(
            env,
            fn is_semver_normalized: (CelString, CelBool) -> CelBool,
            name = "isSemver"
        )?;
        cel::add_member_overload!(env, fn major: (Semver) -> Result<CelInt>)?;
        cel::add_member_overload!(env, fn minor: (Semver) -> Result<CelInt>)?;
        cel::add_member_overload!(env, fn patch: (Semver) -> Result<CelInt>)?;
        cel::add_member_overload!(
            env,
            fn semver_greater: (Semver, Semver) -> CelBool,
            name = "isGreaterThan"
        )?;
        cel::add_member_overload!(
            env,
            fn semver_less: (Semver, Semver) -> CelBool,
            name = "isLessThan"
        )?;
        cel::add_member_overload!(
            env,
            fn semver_compare: (Semver, Semver) -> CelInt,
            name = "compareTo"
        )?;
        Ok::<(), cel::DeclarationError>(())
    })();
    if let Err(e) = declared {
        // Declarations are fixed in this file: a failure is a bug here,
        // and a selector then fails to compile with its own message.
        tracing::error!(error = %e, "declaring CEL functions");
    }
    Arc::new(env)
});

/// Compiles every expression of a list.
pub(crate) fn compile_all(sources: &[String]) -> Result<Vec<Selector>, SelectorError> {
    sources.iter().map(|s| compile(s)).collect()
}

/// Compiles one expression, within the bounds.
pub(crate) fn compile(source: &str) -> Result<Selector, SelectorError> {
    let expression = || source.to_string();
    if source.len() > MAX_LENGTH {
        return Err(SelectorError::TooLong {
            expression: expression(),
            length: source.len(),
        });
    }
    // The parser recurses on chains such as `1+1+…` that its own depth
    // limit does not count: parse where a 10 KiB chain cannot exhaust the
    // stack, and drop a tree too deep to evaluate there too.
    let parsed = std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn_scoped(s, || -> Result<Program, SelectorError> {
                let program = ENV.compile(source).map_err(|e| SelectorError::Compile {
                    expression: expression(),
                    message: e.to_string(),
                })?;
                let depth = depth(program.expression());
                if depth > MAX_DEPTH {
                    return Err(SelectorError::TooDeep {
                        expression: expression(),
                        depth,
                    });
                }
                Ok(program)
            })
            .map(|h| h.join())
    });
    let program = match parsed {
        Ok(Ok(p)) => p?,
        _ => {
            return Err(SelectorError::Compile {
                expression: expression(),
                message: "the compiler could not run".into(),
            });
        }
    };
    let cost = cost(program.expression());
    if cost > MAX_COST {
        return Err(SelectorError::TooCostly {
            expression: expression(),
            cost,
        });
    }
    Ok(Selector {
        source: source.into(),
        program: Arc::new(program),
    })
}

fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Call(c) => c.target.iter().map(|t| &**t).chain(&c.args).collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => entries(&m.entries),
        Expr::Struct(s) => entries(&s.entries),
        Expr::Select(s) => vec![&*s.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

/// The keys and values of a map's or struct's entries.
fn entries(entries: &[cel::common::ast::IdedEntryExpr]) -> Vec<&IdedExpr> {
    entries
        .iter()
        .flat_map(|e| match &e.expr {
            EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
            EntryExpr::StructField(f) => vec![&f.value],
        })
        .collect()
}

/// The tree's depth, without recursion (the tree may be deep).
fn depth(root: &IdedExpr) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(root, 1usize)];
    while let Some((e, d)) = stack.pop() {
        deepest = deepest.max(d);
        stack.extend(children(e).into_iter().map(|c| (c, d + 1)));
    }
    deepest
}

/// Most elements `e` can have when iterated: a literal's own, a
/// comprehension's range's, else a device map's.
fn range_bound(e: &IdedExpr) -> u64 {
    match &e.expr {
        Expr::List(l) => l.elements.len() as u64,
        Expr::Map(m) => m.entries.len() as u64,
        Expr::Comprehension(c) => range_bound(&c.iter_range),
        _ => MAX_RANGE,
    }
}

/// Estimated cost: one per node, a comprehension's condition and step
/// once per element of its range. Called on trees at most
/// [`MAX_DEPTH`] deep.
fn cost(e: &IdedExpr) -> u64 {
    match &e.expr {
        Expr::Comprehension(c) => {
            let per_element = cost(&c.loop_cond).saturating_add(cost(&c.loop_step));
            1u64.saturating_add(cost(&c.iter_range))
                .saturating_add(cost(&c.accu_init))
                .saturating_add(cost(&c.result))
                .saturating_add(range_bound(&c.iter_range).saturating_mul(per_element))
        }
        _ => children(e)
            .into_iter()
            .fold(1u64, |sum, c| sum.saturating_add(cost(c))),
    }
}

/// A map whose unknown keys are empty maps: `device.attributes[domain]`
/// for a domain the device does not have.
#[derive(Debug, Clone)]
struct DomainMap(CelMap<'static>);

impl Val for DomainMap {
    fn get_type(&self) -> &Type {
        &MAP_TYPE
    }
    fn cel_type() -> &'static Type {
        &MAP_TYPE
    }
    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }
    fn as_container(&self) -> Option<&dyn Container> {
        Some(self)
    }
    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }
    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(self)
    }
    fn equals(&self, other: &dyn Val) -> bool {
        match other.downcast_ref::<DomainMap>() {
            Some(o) => self.0.equals(&o.0),
            None => self.0.equals(other),
        }
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for DomainMap {}

impl Indexer for DomainMap {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        match Indexer::get(&self.0, idx) {
            Err(ExecutionError::NoSuchKey(_)) => Ok(CowVal::owned(CelMap::default())),
            other => other,
        }
    }
    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        Indexer::get(&*self, idx).map(CowVal::into_owned)
    }
}
impl Container for DomainMap {
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        Container::contains(&self.0, value)
    }
}
impl Iterable for DomainMap {
    fn iter<'b, 'v>(&'b self) -> Box<dyn cel::common::traits::Iterator<'b, 'v> + 'b>
    where
        Self: 'v,
    {
        Iterable::iter(&self.0)
    }
}
impl Sizer for DomainMap {
    fn size(&self) -> CelInt {
        Sizer::size(&self.0)
    }
}

/// `domain -> id -> value`, a name without a domain in the driver's.
fn by_domain<'a, T: 'a>(
    driver: &str,
    entries: impl Iterator<Item = (&'a String, T)>,
    value: impl Fn(T) -> Box<dyn Val>,
) -> DomainMap {
    let mut domains: BTreeMap<&str, HashMap<CelMapKey<'static>, Box<dyn Val>>> = BTreeMap::new();
    for (name, v) in entries {
        let (domain, id) = name.split_once('/').unwrap_or((driver, name));
        domains
            .entry(domain)
            .or_default()
            .insert(CelMapKey::from(id.to_string()), value(v));
    }
    DomainMap(CelMap::from(
        domains
            .into_iter()
            .map(|(d, m)| {
                (
                    CelMapKey::from(d.to_string()),
                    Box::new(CelMap::from(m)) as Box<dyn Val>,
                )
            })
            .collect::<HashMap<_, _>>(),
    ))
}

/// The `device` variable, bound once per device.
#[derive(Debug)]
pub(crate) struct Bound(CelMap<'static>);

impl VariableResolver for Bound {
    fn resolve<'b>(&'b self, name: &str) -> Option<CowVal<'b, 'b>> {
        (name == "device").then(|| CowVal::Borrowed(&self.0 as &dyn Val))
    }
}

pub(crate) fn bind(id: &DeviceId, device: &Device) -> Bound {
    let attributes = by_domain(&id.driver, device.attributes.iter(), |a| match a {
        Attribute::Int(i) => Box::new(CelInt::from(*i)) as Box<dyn Val>,
        Attribute::Bool(b) => Box::new(CelBool::from(*b)),
        Attribute::String(s) => Box::new(CelString::from(s.clone())),
        // A version the API server let through is a semver; one that is
        // not stays text, so a selector on it fails with a type error.
        Attribute::Version(s) => match semver::Version::parse(s) {
            Ok(v) => Box::new(Semver(v)),
            Err(_) => Box::new(CelString::from(s.clone())),
        },
    });
    let capacity = by_domain(&id.driver, device.capacity.iter(), |q| {
        Box::new(*q) as Box<dyn Val>
    });
    let fields: HashMap<CelMapKey<'static>, Box<dyn Val>> = [
        (
            "driver",
            Box::new(CelString::from(id.driver.clone())) as Box<dyn Val>,
        ),
        ("attributes", Box::new(attributes)),
        ("capacity", Box::new(capacity)),
        ("allowMultipleAllocations", Box::new(CelBool::from(false))),
    ]
    .into_iter()
    .map(|(k, v)| (CelMapKey::from(k.to_string()), v))
    .collect();
    Bound(CelMap::from(fields))
}

impl Selector {
    /// The expression.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    pub(crate) fn source_arc(&self) -> Arc<str> {
        self.source.clone()
    }

    /// Whether device `id`, bound as `bound`, satisfies the selector.
    ///
    /// # Errors
    /// The expression fails on this device (a missing attribute, a type
    /// mismatch) or does not give a bool.
    pub(crate) fn matches_bound(
        &self,
        id: &DeviceId,
        bound: &Bound,
    ) -> Result<bool, SelectorError> {
        let mut ctx = Context::with_env(ENV.clone());
        ctx.set_variable_resolver(bound);
        let fail = |message: String| SelectorError::Runtime {
            expression: self.source.to_string(),
            device: id.to_string(),
            message,
        };
        match self.program.execute(&ctx) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(fail(format!(
                "CEL result of type {} could not be converted to bool",
                value_type(&other)
            ))),
            Err(e) => Err(fail(e.to_string())),
        }
    }
}

fn value_type(v: &Value) -> &'static str {
    match v {
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::Float(_) => "double",
        Value::String(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::List(_) => "list",
        Value::Map(_) => "map",
        Value::Null => "null",
        _ => "other",
    }
}
