"""Everything that crosses a border of gangplan, one room per border (DESIGN.md, "Layout").

* :mod:`~gangplan.adapters.files` — instance and plan files (YAML or JSON), the embedded
  default instance; :mod:`~gangplan.adapters.render` — the table ``gangplan solve`` prints;
* :mod:`gangplan.adapters.kube` — Kubernetes dumps and objects in, bindings out;
* :mod:`gangplan.adapters.traces` — public job traces and synthetic instances drawn from them;
* :mod:`gangplan.adapters.bench` — the benchmark suites, their report and plots, the replay;
* :mod:`gangplan.adapters.cli` — the ``gangplan`` command line, one module per command group.

Adapters may import :mod:`gangplan.models`, :mod:`gangplan.topology` and
:mod:`gangplan.solver`; nothing below imports them (``tests/test_layers.py``).
"""
