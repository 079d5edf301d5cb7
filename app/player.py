"""The animation player: every dlsys.viz figure with frames, drawn with step back, play/pause
and step forward buttons and keys (space, left/right arrows) a teacher can drive.

Plotly has no relative "next frame" action, so stepping needs a few lines of JavaScript:
a Streamlit component (app/player/index.html) that draws the same figure JSON with the
plotly.js of the installed plotly package. Streamlit serves a component's folder itself and
refuses symbolic links out of it, so that file is copied (once per plotly version) with the
page into a folder of the machine's temporary directory: no request leaves the machine.
"""

import hashlib
import shutil
import tempfile
from pathlib import Path

import plotly
import plotly.graph_objects as go
import streamlit.components.v1 as components

PAGE = Path(__file__).resolve().parent / "player" / "index.html"
PLOTLY_JS = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


def _folder() -> Path:
    """The component's folder: the page and plotly.min.js, refreshed when either changes."""
    stamp = hashlib.sha256(PAGE.read_bytes() + plotly.__version__.encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"dlsys-player-{stamp}"
    if not (folder / "plotly.min.js").exists():
        staging = Path(tempfile.mkdtemp(prefix="dlsys-player-"))
        shutil.copy(PAGE, staging / "index.html")
        shutil.copy(PLOTLY_JS, staging / "plotly.min.js")
        try:
            staging.rename(folder)  # atomic: two sessions starting at once never see half a folder
        except OSError:  # another session made it first
            shutil.rmtree(staging, ignore_errors=True)
    return folder


_player = components.declare_component("dlsys_player", path=str(_folder()))


def is_animation(fig: go.Figure) -> bool:
    """Whether the figure is an animation: a slider that moves through frames. Read from the
    layout, not ``fig.frames`` (building plotly's frame objects is what dlsys.viz avoids)."""
    return any(step.method == "animate" for slider in fig.layout.sliders for step in slider.steps)


def player(fig: go.Figure, key: str, config: dict, scale: float = 1.0) -> None:
    """Draw an animated figure in the player (its iframe takes the figure's height once drawn);
    ``scale`` enlarges the toolbar with the figure's texts (presenter mode). The figure goes
    as its JSON text: plotly's encoder knows numpy, Streamlit's would not."""
    _player(spec=fig.to_json(), config=config, scale=scale, key=key, default=None)
