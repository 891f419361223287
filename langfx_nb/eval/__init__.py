"""``lf.eval``: datasets of cases, evaluators, evaluation runs on ``lf.batch``, reports and
comparisons. Loaded on first use of ``lf.eval`` (``import langfx_nb`` does not import it).

```python
ds = lf.eval.Dataset([lf.eval.Case("2+2", expected="4"), ...])
def short(ctx: lf.eval.EvalContext) -> bool:       # an evaluator: one context argument
    return len(ctx.output) < 80
report = await lf.eval.run(task, ds, [lf.eval.exact, short, lf.eval.judge(lm, "polite?")])
lf.eval.compare(baseline, report)
```
"""

from __future__ import annotations

from .compare import CaseDelta, Comparison, MetricDelta, compare
from .context import EvalContext, current_session
from .dataset import Case, Dataset
from .evaluators import contains, exact, fields, numeric
from .judge import JUDGE_PROMPT, Verdict, judge
from .report import CaseResult, Metric, Report
from .runner import run
from .score import Evaluator, Score, ScoreRecord
from .stats import Interval, mean_interval, paired_difference, wilson
from .trace_checks import max_cost, max_steps, tool_called, tool_not_called, trace_cost

__all__ = [
    "JUDGE_PROMPT",
    "Case",
    "CaseDelta",
    "CaseResult",
    "Comparison",
    "Dataset",
    "EvalContext",
    "Evaluator",
    "Interval",
    "Metric",
    "MetricDelta",
    "Report",
    "Score",
    "ScoreRecord",
    "Verdict",
    "compare",
    "contains",
    "current_session",
    "exact",
    "fields",
    "judge",
    "max_cost",
    "max_steps",
    "mean_interval",
    "numeric",
    "paired_difference",
    "run",
    "tool_called",
    "tool_not_called",
    "trace_cost",
    "wilson",
]
