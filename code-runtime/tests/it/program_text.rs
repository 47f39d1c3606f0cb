//! The program text rules every provider shares: a program in a Markdown code fence.

use code_runtime::provider::unfenced;

#[test]
fn one_fenced_block_runs_as_its_content_with_its_lines_kept() {
    let cases = [
        ("```ts\nreturn 1;\n```", Some("\nreturn 1;\n")),
        ("```\nreturn 1;\n```\n\n", Some("\nreturn 1;\n")),
        ("\n\n  ```python {.numberLines}\nx = 1\nx\n```  \n", Some("\n\n  \nx = 1\nx\n")),
        ("~~~js\nreturn 2\n~~~", Some("\nreturn 2\n")),
        // A longer fence may hold a shorter one.
        ("````md\n```\nnot a fence here\n```\n````", Some("\n```\nnot a fence here\n```\n")),
        ("```ts\n```", Some("\n")),
    ];
    for (program, expected) in cases {
        assert_eq!(unfenced(program).as_deref(), expected, "{program:?}");
        if let Some(content) = unfenced(program) {
            // The content's lines are where they were: line n of the result is line n of the
            // program (the opening fence line is now empty).
            let original: Vec<&str> = program.lines().collect();
            for (number, line) in content.lines().enumerate().filter(|(_, l)| !l.trim().is_empty())
            {
                assert_eq!(
                    original[number].trim_end(),
                    line.trim_end(),
                    "{program:?} line {number}"
                );
            }
        }
    }
}

#[test]
fn anything_else_is_left_as_it_is() {
    for program in [
        "return 1;",
        "`return 1`",
        "``\nreturn 1\n``",
        "Here is the program:\n```ts\nreturn 1\n```",
        "```ts\nreturn 1\n```\nand that is it",
        "```ts\nconst a = 1;\n```\n```ts\nreturn a;\n```",
        "```ts\nreturn 1```",
        "```ts``` return 1\n```",
        "```ts\nreturn 1\n",
    ] {
        assert_eq!(unfenced(program), None, "{program:?}");
    }
}
