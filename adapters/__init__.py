"""Everything that crosses a border of gangplan, one room per border (docs/design.md, "Layout").

* :mod:`~gangplan.adapters.files` — instance and plan files (YAML or JSON), the embedded
  default instance; :mod:`~gangplan.adapters.render` — the table ``gangplan solve`` prints;
  :mod:`~gangplan.adapters.report` — what the bench's and the simulator's reports share;
* :mod:`gangplan.adapters.kube` — Kubernetes dumps and objects in, bindings out;
* :mod:`gangplan.adapters.traces` — public job traces and synthetic instances drawn from them;
* :mod:`gangplan.adapters.bench` — the benchmark suites, their report and plots, the replay;
* :mod:`gangplan.adapters.sim` — the simulator: job traces over simulated time
  (``gangplan simulate``, ``docs/simulate.md``);
* :mod:`gangplan.adapters.serve` — the live loop against a cluster (``gangplan serve``,
  ``apply`` and ``webhook``, ``docs/serve.md``);
* :mod:`gangplan.adapters.cli` — the ``gangplan`` command line, one module per command group.

Adapters may import :mod:`gangplan.models`, :mod:`gangplan.topology` and
:mod:`gangplan.solver`; nothing below imports them (``tests/test_layers.py``). Inside, the
command line is the top: it imports the other rooms, none of them imports it.
"""
