"""The controls of an animated figure: Play and Pause buttons and a slider over the frames.

Every frame is drawn with ``redraw=True``: Streamlit's plotly.js (4.2) drops the traces a
frame does not name when ``redraw=False``."""

from __future__ import annotations

STILL = dict(frame=dict(duration=0, redraw=True), mode="immediate", transition=dict(duration=0))


def playing(frame_ms: int) -> dict:
    """plotly's animate arguments that play on from the current frame, ``frame_ms`` a frame."""
    return dict(
        frame=dict(duration=frame_ms, redraw=True), fromcurrent=True, mode="immediate", transition=dict(duration=0)
    )


def play_button(frame_ms: int, label: str = "▶ Play") -> dict:
    return dict(label=label, method="animate", args=[None, playing(frame_ms)])


def buttons(play: list[dict], **place) -> dict:
    """An updatemenu of the ``play`` buttons and Pause, left to right; ``place``: x, y, font..."""
    return dict(
        type="buttons",
        direction="left",
        xanchor="left",
        yanchor="top",
        showactive=False,
        buttons=play + [dict(label="❚❚ Pause", method="animate", args=[[None], STILL])],
        **place,
    )


def time_slider(times, div: float, unit: str, prefix: str, font: dict | None = None, **place) -> dict:
    """A slider with a step per frame (frame k named str(k)) at the virtual ``times``, showing
    only the current one ("``prefix`` 1.23 ms"): a label per step would overlap."""
    return dict(
        active=0,
        yanchor="top",
        ticklen=0,
        minorticklen=0,
        font=dict(color="rgba(0,0,0,0)"),
        currentvalue=dict(prefix=prefix, suffix=f" {unit}", **(dict(font=font) if font else {})),
        steps=[dict(label=f"{t / div:.3g}", method="animate", args=[[str(k)], STILL]) for k, t in enumerate(times)],
        **place,
    )
