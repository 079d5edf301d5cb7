"""The animation player (app/player.py): its files, which figures it takes, and in a real
browser at a projector's 1280x720, the keys and buttons a teacher drives it with."""

import sys
import time
from pathlib import Path

import pytest

from dlsys import experiments as E
from dlsys.viz import animation, comm

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "app"))
import player  # noqa: E402

# the app server and the browser, started as test_browser.py starts them
from test_browser import CHROMIUM, PLAYER, app, browser, no_exception, wait_for_script  # noqa: E402,F401

PROJECTOR = {"width": 1280, "height": 720}


def test_the_players_folder_holds_the_installed_plotly_js_and_its_page():
    folder = player._folder()
    assert (folder / "plotly.min.js").read_bytes() == player.PLOTLY_JS.read_bytes()
    assert (folder / "index.html").read_bytes() == player.PAGE.read_bytes()
    assert "https://" not in player.PAGE.read_text() and "http://" not in player.PAGE.read_text()


def test_only_animations_go_to_the_player():
    trace = E.simulate_collective("allreduce", "ring", 4, "1KiB", "tcp-10gbe")["result"].trace
    assert player.is_animation(animation.message_animation({"ring": trace}))
    assert not player.is_animation(comm.timeline(trace))


def _poll(read, want, timeout_s: float = 10.0):
    """``read()`` once it equals ``want`` (a value or a predicate), else fail with the last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = read()
        if (want(got) if callable(want) else got == want) or time.monotonic() > deadline:
            assert want(got) if callable(want) else got == want, got
            return got
        time.sleep(0.1)


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium at /usr/bin/chromium")
def test_arrows_step_and_space_plays_with_the_pointer_over_the_animation(app, browser):  # noqa: F811
    page = browser.new_page(viewport=PROJECTOR)
    page.goto(f"{app[0]}/collectives?coll_ranks=4")
    page.wait_for_selector(PLAYER, timeout=60_000)
    wait_for_script(page)
    no_exception(page)
    frame = page.frame_locator(PLAYER).first
    plot = frame.locator(".js-plotly-plot")
    plot.locator(".main-svg").first.wait_for(timeout=60_000)
    stops = plot.evaluate("el => el.layout.meta.stops")

    def shown():
        """The player's frame, and the one plotly's slider shows: they must agree."""
        return int(frame.locator("#player").get_attribute("data-frame")), plot.evaluate(
            "el => el._fullLayout.sliders[0].active"
        )

    assert shown() == (0, 0) and len(stops) > 3
    frame.locator("#plot").hover()
    page.keyboard.press("ArrowRight")
    _poll(shown, (stops[1], stops[1]))
    page.keyboard.press("ArrowRight")
    _poll(shown, (stops[2], stops[2]))
    page.keyboard.press("ArrowLeft")
    _poll(shown, (stops[1], stops[1]))
    page.keyboard.press("Shift+ArrowRight")  # one frame
    _poll(shown, (stops[1] + 1, stops[1] + 1))
    caption = "el => [...el.querySelectorAll('.textpoint')].map(t => t.textContent).find(t => t.includes(' step '))"
    frame.locator("#forward").click()
    _poll(shown, (stops[2], stops[2]))
    assert plot.evaluate(caption) == "reduce-scatter step 3 of 3"
    frame.locator("#back").click()
    _poll(shown, (stops[1], stops[1]))
    assert plot.evaluate(caption) == "reduce-scatter step 2 of 3"

    frame.locator("#plot").hover()
    page.keyboard.press(" ")
    assert _poll(lambda: frame.locator("#play").inner_text(), "❚❚ Pause")
    playing = _poll(lambda: shown()[0], lambda k: k > stops[1] + 2)
    page.keyboard.press(" ")
    _poll(lambda: frame.locator("#play").inner_text(), "▶ Play")
    paused = shown()[0]
    assert paused >= playing
    page.wait_for_timeout(800)
    assert shown()[0] == paused, "space did not pause"
    page.close()


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium at /usr/bin/chromium")
def test_the_step_caption_and_play_are_on_screen_together(app, browser):  # noqa: F811
    """At 1280x720 with 16 ranks (the tallest Ring step by step), wherever Play is on screen
    the step caption is too: the toolbar shows it beside Play, and follows the frame."""
    page = browser.new_page(viewport=PROJECTOR)
    page.goto(f"{app[0]}/collectives?coll_ranks=16&coll_view=Ring+step+by+step")
    page.wait_for_selector(f".st-key-coll_ring_steps {PLAYER}", timeout=60_000)
    wait_for_script(page)
    frame = page.frame_locator(f".st-key-coll_ring_steps {PLAYER}")
    frame.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=60_000)
    frame.locator(".bar").evaluate("el => el.scrollIntoView({block: 'center'})")  # the toolbar: Play and the caption
    for element in (frame.locator("#play"), frame.locator("#where")):
        box = element.bounding_box()
        assert 0 <= box["y"] and box["y"] + box["height"] <= PROJECTOR["height"], box
    assert frame.locator("#where").inner_text().startswith("start: rank r holds its own input")
    frame.locator("#forward").click()
    _poll(lambda: frame.locator("#where").inner_text(), lambda t: t.startswith("reduce-scatter step 1 of 15"))
    page.close()


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium at /usr/bin/chromium")
def test_playing_one_message_keeps_every_stage_bar(app, browser):  # noqa: F811
    """Network stack, One message: while it plays, every stage's bar stays drawn (the issue's
    tour saw Play hide them all) and the toolbar names the stage the message is in."""
    page = browser.new_page(viewport=PROJECTOR)
    page.goto(f"{app[0]}/network_stack")
    page.wait_for_selector(PLAYER, timeout=60_000)
    wait_for_script(page)
    frame = page.frame_locator(PLAYER).first
    plot = frame.locator(".js-plotly-plot")
    plot.locator(".main-svg").first.wait_for(timeout=60_000)
    bars = "el => el.querySelectorAll('.barlayer .point path').length"
    before = plot.evaluate(bars)
    assert before > 10
    frame.locator("#plot").hover()
    page.keyboard.press(" ")
    _poll(lambda: int(frame.locator("#player").get_attribute("data-frame")), lambda k: k > 5)
    assert plot.evaluate(bars) == before
    assert frame.locator("#where").inner_text().startswith("tcp-10gbe: ")
    page.close()
