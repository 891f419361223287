"""An evaluation on another engine, as docs/eval.md offers it ("``engine=`` ... are
``lf.batch``'s"): the task's model calls through a provider's batch API at half price (a
real local server speaking OpenAI's batch wire), then the evaluators, a judge among them,
score every answer."""

from __future__ import annotations

from pathlib import Path

import langfx_nb as lf
from langfx_nb.llms.fake import StaticResponse

from ..spend.provider_server import ProviderServer, openai_model


async def test_a_judge_scores_the_answers_of_a_provider_batch(tmp_path: Path) -> None:
    with ProviderServer(steps_to_finish=1) as server:
        lm = openai_model(server)

        async def label(text: str, session: lf.Session) -> str:
            return str(await session.query("Label this ticket: {{t}}", vars={"t": text}, lm=lm))

        judge = lf.eval.judge(
            StaticResponse("Verdict(reason='fine', passed=True)", model="judge"), "A label?"
        )
        try:
            report = await lf.eval.run(
                label,
                ["t1", "t2"],
                [judge],
                run=tmp_path / "eval.sqlite",
                engine=lf.engines.ProviderBatch(poll_interval=0.0),
                progress=False,
                live=False,
            )
        except (ValueError, lf.ProviderBatchError):  # refused: then nothing was submitted
            assert server.create_requests("openai") == 0
            return
        finally:
            await lm.aclose()
    for trial in report:
        assert trial.status == "ok"
        assert trial.scores["judge"].error is None
        assert trial.scores["judge"].score == lf.eval.Score(True, "pass", "fine")
