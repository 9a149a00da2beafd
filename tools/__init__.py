"""Tools of the repository's checkout, not of the installed ``rdss`` package: the benchmarks
(``python -m rdss bench ...``), the workload generator, the demo (``make demo``), the tour and
the Spark class-data-sharing recorder. They use the examples, the Glue jobs and the test
fixtures beside them; ``rdss`` never imports them (its CLI loads them through
:mod:`rdss.cli.checkout`)."""
