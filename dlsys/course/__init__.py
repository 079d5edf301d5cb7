"""The course's own tooling, above the experiments it runs: ``reproduce`` (every published
claim the course teaches: paper vs dlsys and a verdict), ``docs`` (the tables of docs/
generated from the code) and ``precomputed`` (the committed store of the app's default
views, a pure cache of virtual-time results). Import each as a module."""
