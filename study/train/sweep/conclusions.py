"""The train study's conclusions: per model and data set, what reached the target first."""

from __future__ import annotations

import pandas as pd

from study.conclusions import Conclusion
from study.train.sweep.report import QUESTION, problem_sentences


def train_conclusions(runs: pd.DataFrame, study: str) -> list[Conclusion]:
    """Per model and data set, the configuration (optimizer and framework) that reached the
    validation target first, firm when it is distinguishable from the runner-up."""

    return [Conclusion(f"train.fastest.{problem}", QUESTION, sentence, c,
                       sentence.split(": ", 1)[-1].split(" had the")[0], firm,
                       f"{study}-train", answer=True)
            for problem, sentence, c, firm in problem_sentences(runs)]
