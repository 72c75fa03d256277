//! Loading policies: good ones load, bad ones are refused with a clear,
//! distinct message naming the source and the cause.

use dragon_runtime::{ComponentCache, LoadError, LoadOptions, PolicySource, WasmPolicy};
use dragon_tests::{bundled, engine, hostile};

fn load_bytes(origin: &str, bytes: &[u8]) -> Result<WasmPolicy, LoadError> {
    WasmPolicy::from_bytes(
        &engine(),
        &ComponentCache::disabled(),
        origin,
        bytes,
        &LoadOptions::default(),
    )
}

/// A component of `world` in the WIT `text`, with placeholder bodies
/// (wit-component's dummy module): enough to exercise load-time checks.
fn dummy_component(text: &str, world: &str) -> Vec<u8> {
    let mut resolve = wit_parser::Resolve::default();
    let pkg = resolve.push_str("test.wit", text).unwrap();
    let world = resolve.select_world(&[pkg], Some(world)).unwrap();
    let mut module =
        wit_component::dummy_module(&resolve, world, wit_parser::ManglingAndAbi::Standard32);
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .unwrap();
    wit_component::ComponentEncoder::default()
        .module(&module)
        .unwrap()
        .encode()
        .unwrap()
}

/// A component whose world is the policy world at another interface version.
fn component_at_version(version: &str) -> Vec<u8> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../wit/v0.2/scheduler.wit"
    ))
    .unwrap();
    let text = text.replace(
        "package dragon:scheduler@0.2.0;",
        &format!("package dragon:scheduler@{version};"),
    );
    dummy_component(&text, "scheduling-policy")
}

#[test]
fn both_bundled_policies_load_and_report_their_interface_version() {
    let e = engine();
    for name in ["dragon", "baseline"] {
        let p = bundled(&e, name, "");
        assert_eq!(p.info().name, name);
        assert_eq!(p.info().interface_version, "0.4.0");
        assert!(!p.info().hooks.is_empty());
    }
}

#[test]
fn a_garbage_file_is_not_webassembly() {
    let err = load_bytes("junk.wasm", b"this is not wasm at all")
        .err()
        .unwrap();
    assert!(matches!(err, LoadError::NotWasm { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("junk.wasm is not a WebAssembly binary"),
        "{err}"
    );
}

#[test]
fn a_core_module_is_refused_as_not_a_component() {
    let err = load_bytes("core.wasm", b"\0asm\x01\0\0\0").err().unwrap();
    assert!(matches!(err, LoadError::CoreModule { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("core.wasm is a core WebAssembly module, not a component"),
        "{err}"
    );
}

#[test]
fn a_truncated_component_is_invalid() {
    let bytes = &dragon_bundled::DRAGON[..dragon_bundled::DRAGON.len() / 2];
    let err = load_bytes("half.wasm", bytes).err().unwrap();
    assert!(matches!(err, LoadError::Invalid { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("half.wasm is not a valid component"),
        "{err}"
    );
}

#[test]
fn a_component_built_against_another_interface_version_is_refused_naming_the_served_ones() {
    for v in ["0.5.0", "1.0.0"] {
        let err = load_bytes("future.wasm", &component_at_version(v))
            .err()
            .unwrap();
        assert!(matches!(err, LoadError::Version { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("dragon:scheduler@{v}"))
                && msg.contains(
                    "dragon:scheduler@0.1.0, dragon:scheduler@0.2.0, dragon:scheduler@0.3.0, dragon:scheduler@0.4.0"
                ),
            "{msg}"
        );
    }
}

/// The policy world importing `import` too, from a package of its own.
fn policy_importing(package: &str, interface: &str) -> Vec<u8> {
    let wit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../wit/v0.2/scheduler.wit"
    ))
    .unwrap();
    let (name, version) = package.split_once('@').unwrap();
    let import = format!("    import host;\n    import {name}/{interface}@{version};\n");
    // `get-random-u64` is the function of WASI's `random` interface.
    let foreign = format!(
        "package {package} {{ interface {interface} {{ get-random-u64: func() -> u64; }} }}"
    );
    let text = format!(
        "{}\n{foreign}\n",
        wit.replace("    import host;\n", &import)
    );
    dummy_component(&text, "scheduling-policy")
}

#[test]
fn an_import_beyond_the_policy_world_and_wasi_0_2_is_refused_by_name() {
    // Refused or not, nothing refused is left in the cache.
    let dir = std::env::temp_dir().join(format!("dragon-refused-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = ComponentCache::at(&dir);
    let load = |origin: &str, bytes: &[u8]| {
        WasmPolicy::from_bytes(&engine(), &cache, origin, bytes, &LoadOptions::default())
            .err()
            .unwrap()
    };
    // Refused from its declared imports, before it is compiled.
    let err = load("http.wasm", &policy_importing("wasi:http@0.2.0", "random"));
    assert!(matches!(err, LoadError::Import { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("http.wasm imports wasi:http/random@0.2.0, which Dragon does not provide"),
        "{err}"
    );
    assert_eq!(compiled_in(&dir).len(), 0);
    // WASI 0.2 itself is linked: this placeholder policy gets past the
    // import check and instantiation, and fails only in its first call;
    // compiled, then refused, it is not kept either.
    let err = load(
        "random.wasm",
        &policy_importing("wasi:random@0.2.0", "random"),
    );
    assert!(matches!(err, LoadError::Smoke { .. }), "{err}");
    assert_eq!(compiled_in(&dir).len(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_component_of_another_world_is_not_a_policy() {
    // The WIT's types interface alone, exported: a component, but no policy.
    let text =
        "package other:thing@1.0.0; interface api { f: func() -> u32; } world w { export api; }";
    let bytes = dummy_component(text, "w");
    let err = load_bytes("other.wasm", &bytes).err().unwrap();
    assert!(matches!(err, LoadError::NotAPolicy { .. }), "{err}");
    assert!(err.to_string().contains("other:thing/api@1.0.0"), "{err}");
}

#[test]
fn invalid_settings_refuse_the_load_with_the_policys_message() {
    let options = LoadOptions {
        settings: r#"{"starvation_treshold_s": 5}"#.into(),
        ..Default::default()
    };
    let err = WasmPolicy::load(
        &engine(),
        &ComponentCache::disabled(),
        &PolicySource::named_or_file("dragon"),
        &options,
    )
    .err()
    .unwrap();
    assert!(matches!(err, LoadError::Settings { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("unknown field `starvation_treshold_s`"),
        "{err}"
    );
}

#[test]
fn a_trap_while_configuring_fails_the_load_check() {
    let err = hostile(
        &engine(),
        r#"{"fault": "trap", "hook": "configure"}"#,
        LoadOptions::default(),
    )
    .err()
    .unwrap();
    assert!(matches!(err, LoadError::Smoke { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("hostile") && msg.contains("configure") && msg.contains("trap"),
        "{msg}"
    );
}

#[test]
fn a_missing_file_names_the_path() {
    let err = WasmPolicy::load(
        &engine(),
        &ComponentCache::disabled(),
        &PolicySource::File("/nonexistent/policy.wasm".into()),
        &LoadOptions::default(),
    )
    .err()
    .unwrap();
    assert!(
        err.to_string().contains("/nonexistent/policy.wasm"),
        "{err}"
    );
}

#[test]
fn a_digest_off_the_allowlist_is_refused_and_one_on_it_loads() {
    let options = LoadOptions {
        sha256: vec!["00".repeat(32), "11".repeat(32)],
        ..Default::default()
    };
    let err = WasmPolicy::from_bytes(
        &engine(),
        &ComponentCache::disabled(),
        "dragon",
        dragon_bundled::DRAGON,
        &options,
    )
    .err()
    .unwrap();
    assert!(matches!(err, LoadError::Digest { .. }), "{err}");
    assert!(
        err.to_string().contains(&format!(
            "does not allow (allowed: {}, {})",
            "00".repeat(32),
            "11".repeat(32)
        )),
        "{err}"
    );
    // Any digest of the list is allowed.
    let digest = dragon_runtime::sha256_hex(dragon_bundled::DRAGON);
    let options = LoadOptions {
        sha256: vec!["00".repeat(32), digest.to_uppercase()],
        ..Default::default()
    };
    WasmPolicy::from_bytes(
        &engine(),
        &ComponentCache::disabled(),
        "dragon",
        dragon_bundled::DRAGON,
        &options,
    )
    .unwrap();
}

#[test]
fn a_second_load_comes_from_the_compiled_cache() {
    let dir = std::env::temp_dir().join(format!("dragon-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = ComponentCache::at(&dir);
    let e = engine();
    let first = WasmPolicy::from_bytes(
        &e,
        &cache,
        "baseline",
        dragon_bundled::BASELINE,
        &LoadOptions::default(),
    )
    .unwrap();
    let second = WasmPolicy::from_bytes(
        &e,
        &cache,
        "baseline",
        dragon_bundled::BASELINE,
        &LoadOptions::default(),
    )
    .unwrap();
    assert!(!first.info().cached);
    assert!(second.info().cached);
    // A corrupt cache entry is ignored, not fatal.
    for f in std::fs::read_dir(&dir).unwrap() {
        std::fs::write(f.unwrap().path(), b"garbage").unwrap();
    }
    let third = WasmPolicy::from_bytes(
        &e,
        &cache,
        "baseline",
        dragon_bundled::BASELINE,
        &LoadOptions::default(),
    )
    .unwrap();
    assert!(!third.info().cached);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The compiled components in cache directory `dir`, by file name.
fn compiled_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".cwasm"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn the_compiled_cache_keeps_to_its_size_by_evicting_the_least_recently_used() {
    let dir = std::env::temp_dir().join(format!("dragon-cache-bound-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let e = engine();
    let load = |cache: &ComponentCache, name: &str, bytes: &[u8]| {
        WasmPolicy::from_bytes(&e, cache, name, bytes, &LoadOptions::default())
            .unwrap()
            .info()
            .cached
    };
    let size = |name: &str| std::fs::metadata(dir.join(name)).unwrap().len();
    // Each compiled alone, to learn its size.
    let unbounded = ComponentCache::at(&dir);
    load(&unbounded, "baseline", dragon_bundled::BASELINE);
    let baseline = compiled_in(&dir);
    load(&unbounded, "dragon", dragon_bundled::DRAGON);
    let both = compiled_in(&dir);
    let dragon: Vec<String> = both
        .iter()
        .filter(|n| !baseline.contains(n))
        .cloned()
        .collect();
    let (b, d) = (size(&baseline[0]), size(&dragon[0]));
    std::fs::remove_dir_all(&dir).unwrap();
    // Room for the larger of the two, not for both.
    let cache = ComponentCache::at(&dir).with_max_bytes(b.max(d) + b.min(d) / 2);
    assert!(!load(&cache, "baseline", dragon_bundled::BASELINE));
    assert!(load(&cache, "baseline", dragon_bundled::BASELINE));
    assert!(!load(&cache, "dragon", dragon_bundled::DRAGON));
    assert_eq!(
        compiled_in(&dir),
        dragon,
        "baseline, used least recently, is gone"
    );
    assert!(load(&cache, "dragon", dragon_bundled::DRAGON));
    assert!(!load(&cache, "baseline", dragon_bundled::BASELINE));
    assert_eq!(compiled_in(&dir), baseline);
    // A cache smaller than one compiled component keeps none.
    std::fs::remove_dir_all(&dir).unwrap();
    let tiny = ComponentCache::at(&dir).with_max_bytes(1024);
    assert!(!load(&tiny, "baseline", dragon_bundled::BASELINE));
    assert!(!load(&tiny, "baseline", dragon_bundled::BASELINE));
    assert_eq!(compiled_in(&dir).len(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
