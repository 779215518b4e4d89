"""The toy's report section."""

from study.report.blocks import Block


def section(results, figures):
    runs = results.runs[results.runs["status"] == "ok"]
    return [Block("h2", "The toy question", anchor=f"{results.folder.name}-toy"),
            Block("p", f"Mean cost: {runs.groupby('method')['cost'].mean().round(2).to_dict()}.")]
