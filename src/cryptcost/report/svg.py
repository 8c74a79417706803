"""matplotlib set up once for every chart of the HTML report, and a figure turned into an inline
SVG string: deterministic for the same data (a fixed SVG hash salt, no dates in metadata)."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

plt.rcParams.update({"svg.hashsalt": "cryptcost", "svg.fonttype": "none", "font.size": 9,
                     "axes.spines.top": False, "axes.spines.right": False})


def svg(fig) -> str:
    """``fig`` as an inline ``<svg>`` element; the figure is closed."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight",
                metadata={"Date": None, "Creator": "cryptcost"})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]
