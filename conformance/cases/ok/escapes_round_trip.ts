return await tools.echo("quote \" backslash \\ tab \t newline \n nul \u0000 del \u007f")
