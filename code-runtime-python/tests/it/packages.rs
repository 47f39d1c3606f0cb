//! Programs import the packages of the host's virtual environment (`python-packages/`: numpy and
//! pandas, installed from its lockfile by `cargo xtask test`), preloaded in the zygote or not.

use std::path::PathBuf;

use code_runtime::json;

use crate::*;

/// The virtual environment's interpreter (a symlink to the system's `python3`).
fn venv_python() -> PathBuf {
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../python-packages/.venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: `cargo xtask test` installs python-packages/ from its lockfile",
        python.display()
    );
    python
}

fn packages_runtime(preload: &[&str], zygote: bool) -> Result<PythonCodeRuntime, PythonError> {
    PythonCodeRuntime::new(PythonConfig {
        interpreter: venv_python(),
        preload: preload.iter().map(|module| (*module).to_owned()).collect(),
        zygote,
        ..PythonConfig::default()
    })
}

const COMPUTE: &str = "import numpy as np, pandas as pd\n\
    df = pd.DataFrame({'a': np.arange(1000), 'b': np.ones(1000)})\n\
    return [int(df['a'].sum()), float(df['b'].mean()) == 1.0, np.__version__, pd.__version__]";

#[test]
fn a_virtual_environments_packages_import_and_compute() {
    let runtime = packages_runtime(&[], true).unwrap();
    let listed = runtime.packages();
    assert!(listed.contains(&("pandas".to_owned(), "2.3.3".to_owned())), "{listed:?}");
    assert!(listed.contains(&("numpy".to_owned(), "2.2.6".to_owned())), "{listed:?}");
    assert!(default_runtime().packages().is_empty(), "{:?}", default_runtime().packages());
    let result = run_on(&runtime, CodeRunRequest::new(COMPUTE));
    assert_eq!(value(&result), &json!([499500, true, "2.2.6", "2.3.3"]));
    // The default interpreter has no such environment: a clear error in the program.
    let result = run("import pandas", Vec::new());
    let error = result.error().expect("pandas is not the default interpreter's");
    assert!(error.message().contains("No module named 'pandas'"), "{}", error.message());
}

#[test]
fn the_environment_is_read_only_and_nothing_else_of_it_is_in_the_cell() {
    let runtime = packages_runtime(&[], true).unwrap();
    let venv = venv_python().parent().unwrap().parent().unwrap().to_owned();
    let program = format!(
        "import os, numpy\n\
         site = os.path.dirname(os.path.dirname(numpy.__file__))\n\
         seen = {{}}\n\
         for name, action in [\n\
             ('write a module', lambda: open(os.path.join(site, 'planted.py'), 'w')),\n\
             ('remove a package', lambda: os.rename(os.path.join(site, 'numpy'), '/tmp/numpy')),\n\
             ('make a directory', lambda: os.mkdir(os.path.join(site, 'x'))),\n\
         ]:\n    \
             try:\n        \
                 action()\n        \
                 seen[name] = 'done'\n    \
             except OSError as error:\n        \
                 seen[name] = type(error).__name__\n\
         seen['venv bin'] = os.path.exists({bin:?})\n\
         seen['pyvenv.cfg'] = os.path.exists({cfg:?})\n\
         home = os.path.expanduser('~/.cache/some-package')\n\
         os.makedirs(home)\n\
         with open(os.path.join(home, 'cache.json'), 'w') as file:\n    \
             file.write('{{}}')\n\
         seen['home cache'] = os.listdir(home)\n\
         return seen",
        bin = venv.join("bin").to_string_lossy(),
        cfg = venv.join("pyvenv.cfg").to_string_lossy(),
    );
    let result = run_on(&runtime, CodeRunRequest::new(program));
    let seen = value(&result);
    for action in ["write a module", "remove a package", "make a directory"] {
        let outcome = seen[action].as_str().unwrap();
        assert!(["PermissionError", "OSError"].contains(&outcome), "{action}: {outcome} ({seen})");
    }
    assert_eq!(seen["venv bin"], json!(false), "{seen}");
    assert_eq!(seen["pyvenv.cfg"], json!(false), "{seen}");
    // A package that keeps a cache under the home directory can: it is the run's own.
    assert_eq!(seen["home cache"], json!(["cache.json"]), "{seen}");
}

#[test]
fn preloaded_modules_are_in_every_run_and_what_a_run_does_to_them_reaches_no_other() {
    let runtime = packages_runtime(&["numpy", "pandas"], true).unwrap();
    assert!(runtime.containment().zygote, "runs fork from the zygote that preloaded them");
    let loaded = "import sys\nreturn ['numpy' in sys.modules, 'pandas' in sys.modules]";
    assert_eq!(value(&run_on(&runtime, CodeRunRequest::new(loaded))), &json!([true, true]));
    let mutate = "import numpy, pandas\n\
        numpy.planted = 1\n\
        numpy.set_printoptions(precision=2)\n\
        pandas.set_option('display.max_rows', 7)\n\
        numpy.random.seed(1)\n\
        seeded = float(numpy.random.rand())\n\
        numpy.random.seed(1)\n\
        pandas.DataFrame.planted = lambda self: 'planted'\n\
        return [pandas.get_option('display.max_rows'), seeded]";
    let mutated = value(&run_on(&runtime, CodeRunRequest::new(mutate))).clone();
    assert_eq!(mutated[0], json!(7), "{mutated}");
    let seeded = mutated[1].as_f64().unwrap();
    let look = "import numpy, pandas\n\
        return [hasattr(numpy, 'planted'), numpy.get_printoptions()['precision'],\n\
                pandas.get_option('display.max_rows'), hasattr(pandas.DataFrame, 'planted'),\n\
                float(numpy.random.rand())]";
    let first = value(&run_on(&runtime, CodeRunRequest::new(look))).clone();
    let second = value(&run_on(&runtime, CodeRunRequest::new(look))).clone();
    assert_eq!(
        first.as_array().unwrap()[..4],
        json!([false, 8, 60, false]).as_array().unwrap()[..]
    );
    // numpy's global generator is reseeded in each fork: runs do not draw the same numbers.
    let draw = |value: &JsonValue| value[4].as_f64().unwrap();
    assert_ne!(draw(&first), draw(&second), "{first} {second}");
    assert_ne!(draw(&first), seeded, "the seed a run set stayed: {first}");
    assert_eq!(value(&run_on(&runtime, CodeRunRequest::new(COMPUTE)))[0], json!(499500));
}

#[test]
fn preloading_without_a_zygote_imports_in_each_cell_ahead_of_its_run() {
    let runtime = packages_runtime(&["numpy"], false).unwrap();
    assert!(!runtime.containment().zygote);
    let loaded = "import sys\nreturn 'numpy' in sys.modules";
    for _ in 0..2 {
        assert_eq!(value(&run_on(&runtime, CodeRunRequest::new(loaded))), &json!(true));
    }
}

#[test]
fn a_module_that_cannot_be_preloaded_is_refused_at_construction() {
    let error = packages_runtime(&["no_such_module_here"], true).unwrap_err();
    assert!(matches!(error, PythonError::Interpreter { .. }), "{error}");
    assert!(error.to_string().contains("no_such_module_here"), "{error}");
    for name in ["not a module", "numpy;import os", "", "1numpy", "numpy."] {
        let error = packages_runtime(&[name], true).unwrap_err();
        assert!(matches!(error, PythonError::Config(_)), "{name:?}: {error}");
    }
}

#[test]
fn a_dataframe_and_an_array_carry_to_the_next_run_of_a_session() {
    let runtime = packages_runtime(&[], true).unwrap();
    let id = code_runtime::SessionId::new("frames");
    let first = run_on(
        &runtime,
        CodeRunRequest::new(
            "import numpy as np\nimport pandas as pd\ndf = pd.DataFrame({'a': np.arange(5)})\n\
             grid = np.ones((100, 100))\ndef total(d):\n    return int(d['a'].sum())\nreturn len(df)",
        )
        .session(id.clone()),
    );
    assert_eq!(first.value(), Some(&json!(5)), "{}", first.to_json());
    let kept = &first.session().unwrap().kept;
    let types: Vec<_> = kept.iter().map(|k| (k.name.as_str(), k.type_name.as_str())).collect();
    assert!(
        types.contains(&("df", "DataFrame")) && types.contains(&("grid", "ndarray")),
        "{types:?}"
    );
    let second = run_on(
        &runtime,
        CodeRunRequest::new(
            "df['b'] = df['a'] * 2\nreturn [total(df), list(df.columns), int(grid.sum()), type(df).__name__]",
        )
        .session(id),
    );
    assert_eq!(
        second.value(),
        Some(&json!([10, ["a", "b"], 10000, "DataFrame"])),
        "{}",
        second.to_json()
    );
}
