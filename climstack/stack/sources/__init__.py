"""The offline sources: Debian's source packages and indexes (debian_sources), the
benchmarks' and the model's git routes (git_sources) and the archives made from them
(git_archives), develop trees (develop_trees), and the source mirror they all fill
(source_mirror, bench_sources)."""
