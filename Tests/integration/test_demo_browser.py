"""The demo page (GET /demo) in headless Chromium, driven by Selenium, against
the real binary: two windows join one session, raise hands, ring each other,
one window dies abruptly and the other sees it lost, then timed out or restored.

Every step saves a screenshot (PNG) under the test's tmp_path. Waits are
conditions (WebDriverWait) with bounded timeouts, never sleeps.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 20.0  # bound on one UI condition (a busy 2-core machine starts Chromium slowly)

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait
    from selenium.common.exceptions import StaleElementReferenceException
except ImportError:  # reported by require_browser()
    webdriver = None


def require_browser() -> None:
    """Chromium, chromedriver and selenium come from `scripts/install-deps.sh --test`;
    CI must not pass by skipping them."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if webdriver is None:
        missing.append("selenium (pip)")
    if missing:
        message = f"missing {', '.join(missing)}: run scripts/install-deps.sh --test"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, from /proc (the browser and its helpers)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Window:
    """One browser running the demo page; screenshots go to tmp_path in step order."""

    def __init__(self, label: str, shots: Path, counter: list[int]):
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM  # Debian's; nothing is looked up or downloaded
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1100,950"):
            options.add_argument(arg)
        self.label = label
        self.shots = shots
        self.counter = counter  # shared by the windows of one test: steps in order
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.driver.set_page_load_timeout(WAIT_S)
        self.alive = True

    def join(self, base: str, session: str, name: str, role: str = "participant") -> None:
        self.driver.get(f"{base}/demo?session={session}&role={role}")
        self.driver.find_element(By.ID, "name").send_keys(name)
        self.driver.find_element(By.ID, "join-button").click()
        self.wait(lambda d: d.find_element(By.ID, "room").is_displayed(), "joined")

    def wait(self, condition, what: str):
        return WebDriverWait(self.driver, WAIT_S, poll_frequency=0.05).until(condition, f"{self.label}: {what}")

    def click(self, css: str) -> None:
        """Finds and clicks as one waited step: the lists are re-rendered on every
        event, so a button found a moment ago can be stale by the click (which then
        did not happen, and is tried again on the new one)."""
        def attempt(d) -> bool:
            d.find_element(By.CSS_SELECTOR, css).click()
            return True
        WebDriverWait(self.driver, WAIT_S, poll_frequency=0.05,
                      ignored_exceptions=(StaleElementReferenceException,)).until(attempt, f"{self.label}: click {css}")

    def text(self, element_id: str) -> str:
        return self.driver.find_element(By.ID, element_id).get_attribute("textContent")

    def status_of(self, uid: str) -> str | None:
        # Read in the page: the list is re-rendered on every event, so a located
        # element can go stale between two WebDriver calls.
        return self.driver.execute_script(
            "const li = document.querySelector(`#participants li[data-uid=\"${arguments[0]}\"]`);"
            "return li ? li.dataset.status : null;", uid)

    def wait_status(self, uid: str, status: str) -> None:
        self.wait(lambda d: self.status_of(uid) == status, f"{uid} {status}")

    def wait_announced(self, text: str) -> None:
        self.wait(lambda d: text in self.text("announcer"), f"announced {text!r}")

    def shot(self, step: str) -> Path:
        self.counter[0] += 1
        path = self.shots / f"{self.counter[0]:02d}-{self.label}-{step}.png"
        assert self.driver.save_screenshot(str(path)), path
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        return path

    def kill(self) -> None:
        """Closes the tab abruptly: SIGKILL to the browser and its helpers, so the
        socket ends without a close frame (a clean close would be `left`, §5)."""
        for pid in descendants(self.driver.service.process.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.alive = False

    def quit(self) -> None:
        leftovers = descendants(self.driver.service.process.pid) if self.alive else []
        if self.alive:
            try:
                self.driver.quit()
            except Exception:  # noqa: BLE001 - a browser that hangs must not fail the teardown
                pass
        self.driver.service.stop()
        for pid in leftovers:  # whatever of ours quit left behind
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def windows(tmp_path):
    require_browser()
    opened: list[Window] = []
    counter = [0]

    def open_window(label: str) -> Window:
        w = Window(label, tmp_path, counter)
        opened.append(w)
        return w

    yield open_window
    for w in opened:
        w.quit()


def hands_of(w: Window) -> list[str]:
    return w.driver.execute_script("return [...document.querySelectorAll('#hands li')].map(li => li.dataset.uid);")


def test_hands_and_ringing(relay_factory, windows):
    relay = relay_factory()
    a, b = windows("alice"), windows("bob")
    a.join(relay.http, "room", "Alice", "host")
    b.join(relay.http, "room", "Bob")
    b.wait_status("alice", "connected")
    a.wait_status("bob", "connected")
    a.shot("joined")

    a.driver.find_element(By.ID, "hand-toggle").click()
    a.wait(lambda d: d.find_element(By.ID, "hand-toggle").get_attribute("aria-pressed") == "true", "pressed")
    b.wait(lambda d: hands_of(b) == ["alice"], "alice in the queue")
    b.wait_announced("Alice raised their hand")
    b.driver.find_element(By.ID, "hand-toggle").click()
    a.wait(lambda d: hands_of(a) == ["alice", "bob"], "queue in order")
    b.wait(lambda d: d.execute_script("return document.querySelector('#hands li .ago')?.textContent ?? ''")
           .startswith("raised "), "raised N s ago")
    b.shot("hands")

    # The host lowers Bob's hand from the queue.
    a.click('#hands button[data-action="lower"][data-uid="bob"]')
    b.wait(lambda d: hands_of(b) == ["alice"], "bob lowered by the host")
    b.wait(lambda d: d.find_element(By.ID, "hand-toggle").get_attribute("aria-pressed") == "false", "unpressed")

    b.click('button[data-action="ring"][data-uid="alice"]')
    b.wait(lambda d: "Ringing Alice" in b.text("call-status"), "ringing")
    a.wait(lambda d: d.find_element(By.ID, "incoming").is_displayed(), "incoming dialog")
    assert "Bob is calling" in a.text("incoming-text")
    # The dialog takes focus on Accept, so a keyboard user answers with Enter.
    a.wait(lambda d: d.switch_to.active_element.get_attribute("id") == "accept", "focus on accept")
    a.shot("incoming")
    b.shot("outgoing")
    a.driver.switch_to.active_element.send_keys(Keys.ENTER)
    a.wait(lambda d: "In call with Bob" in a.text("call-status"), "in call")
    b.wait(lambda d: "In call with Alice" in b.text("call-status"), "in call")
    a.shot("in-call")

    b.driver.find_element(By.ID, "call-end").click()
    a.wait(lambda d: "Call ended by Bob" in a.text("call-status"), "ended")
    a.shot("ended")

    # Host controls: lower all, then remove.
    b.driver.find_element(By.ID, "hand-toggle").click()
    a.wait(lambda d: hands_of(a) == ["alice", "bob"], "two hands again")
    a.driver.find_element(By.ID, "lower-all").click()
    b.wait(lambda d: hands_of(b) == [], "all lowered")
    b.wait_announced("All hands lowered")
    a.click('button[data-action="remove"][data-uid="bob"]')
    b.wait(lambda d: d.find_element(By.ID, "join").is_displayed(), "bob back at the join form")
    b.wait_announced("A host removed you from the session")
    a.wait(lambda d: a.status_of("bob") is None, "bob gone from the list")
    a.wait_announced("Bob left")
    a.shot("removed")


def test_tab_closed_lost_then_timed_out(relay_factory, windows):
    # Grace long enough that a page slowed by a loaded machine still shows the lost state
    # (with the hand kept) before it times out.
    relay = relay_factory("--grace", "5000", "--heartbeat-interval", "500", "--heartbeat-timeout", "1500")
    a, b = windows("alice"), windows("bob")
    a.join(relay.http, "room", "Alice", "host")
    b.join(relay.http, "room", "Bob")
    a.driver.find_element(By.ID, "hand-toggle").click()
    b.wait(lambda d: hands_of(b) == ["alice"], "alice in the queue")

    a.kill()
    b.wait_status("alice", "lost")
    b.wait_announced("Alice lost connection")
    assert hands_of(b) == ["alice"], "a lost participant keeps the raised hand (§5)"
    b.shot("lost")
    b.wait_status("alice", "timed-out")
    b.wait_announced("Alice timed out")
    assert hands_of(b) == []
    b.shot("timed-out")


def test_tab_closed_lost_then_restored(relay_factory, windows):
    relay = relay_factory("--grace", "30000")
    a, b = windows("alice"), windows("bob")
    a.join(relay.http, "room", "Alice")
    b.join(relay.http, "room", "Bob")
    b.wait_status("alice", "connected")

    a.kill()
    b.wait_status("alice", "lost")
    b.shot("lost")
    # Back within grace from a new window: a join from a new connection restores (§5).
    again = windows("alice-again")
    again.join(relay.http, "room", "Alice")
    b.wait_status("alice", "restored")
    b.wait_announced("Alice is back")
    b.shot("restored")


def test_keyboard_only(relay_factory, windows):
    relay = relay_factory()
    w = windows("keyboard")
    w.driver.get(f"{relay.http}/demo?session=kb")
    keys = ActionChains(w.driver)

    def tab_to(element_id: str, limit: int = 12) -> None:
        for _ in range(limit):
            if w.driver.switch_to.active_element.get_attribute("id") == element_id:
                return
            keys.send_keys(Keys.TAB).perform()
        assert w.driver.switch_to.active_element.get_attribute("id") == element_id, element_id

    tab_to("name")
    keys.send_keys("Kim", Keys.ENTER).perform()
    w.wait(lambda d: d.find_element(By.ID, "room").is_displayed(), "joined by keyboard")
    tab_to("hand-toggle")
    toggle = w.driver.find_element(By.ID, "hand-toggle")
    assert toggle.get_attribute("aria-pressed") == "false"
    keys.send_keys(Keys.SPACE).perform()
    w.wait(lambda d: toggle.get_attribute("aria-pressed") == "true", "raised by Space")
    w.wait(lambda d: hands_of(w) == ["kim"], "own hand in the queue")
    w.wait_announced("You raised your hand")
    w.shot("raised")
    keys.send_keys(Keys.ENTER).perform()
    w.wait(lambda d: toggle.get_attribute("aria-pressed") == "false", "lowered by Enter")
    assert w.driver.switch_to.active_element.get_attribute("id") == "hand-toggle"
    w.shot("lowered")


# Chromium closes a page's WebSockets with a close frame (1001, going away) when the
# page unloads; the client offers `resume.after_unload` when it keeps its place, so the
# relay holds that close as lost (protocol/ §5) and the reloaded tab resumes.
def test_reload_keeps_the_raised_hand_place(relay_factory, windows):
    """A reloaded tab resumes its place (the client's sessionStorage record, §9): its
    hand keeps its position in the queue and the others never see it leave."""
    relay = relay_factory("--grace", "30000")
    a, b = windows("alice"), windows("bob")
    a.join(relay.http, "room", "Alice")
    b.join(relay.http, "room", "Bob")
    a.wait_status("bob", "connected")
    b.driver.find_element(By.ID, "hand-toggle").click()
    a.wait(lambda d: hands_of(a) == ["bob"], "bob first in the queue")
    a.driver.find_element(By.ID, "hand-toggle").click()
    b.wait(lambda d: hands_of(b) == ["bob", "alice"], "alice second")
    b.shot("before-reload")

    b.driver.refresh()
    b.wait(lambda d: d.find_element(By.ID, "room").is_displayed(), "back in the room without the form")
    b.wait_announced("Back in your place")
    b.wait(lambda d: hands_of(b) == ["bob", "alice"], "the queue as before the reload")
    b.wait(lambda d: d.find_element(By.ID, "hand-toggle").get_attribute("aria-pressed") == "true", "own hand up")
    b.shot("after-reload")
    a.wait_status("bob", "restored")
    assert hands_of(a) == ["bob", "alice"], "bob kept the first place"
    assert "Bob left" not in a.text("announcer")
    a.shot("bob-restored")


def test_reload_enters_the_room_again_and_leave_forgets_it(relay_factory, windows):
    """The demo keeps its identity and session in sessionStorage beside the client's
    record: a reload goes straight back into the room (resumed or, as today after
    the place was gone, rejoined); Leave forgets both."""
    relay = relay_factory()
    a, b = windows("alice"), windows("bob")
    a.join(relay.http, "room", "Alice")
    b.join(relay.http, "room", "Bob")
    a.wait_status("bob", "connected")

    b.driver.refresh()
    b.wait(lambda d: d.find_element(By.ID, "room").is_displayed(), "back in the room without the form")
    assert b.driver.find_element(By.ID, "join").is_displayed() is False
    b.wait_status("alice", "connected")
    # Resumed (the client offers resume.after_unload), bob's replay ends with his own
    # participant.restored.
    b.wait(lambda d: b.status_of("bob") in ("connected", "restored"), "bob listed as himself")
    a.wait(lambda d: a.status_of("bob") in ("connected", "restored"), "bob back for alice")
    b.shot("reloaded")

    b.driver.find_element(By.ID, "leave").click()
    a.wait(lambda d: a.status_of("bob") is None, "bob gone for alice")
    assert b.driver.execute_script("return sessionStorage.getItem('relay.resume')") is None
    b.driver.refresh()
    b.wait(lambda d: d.find_element(By.ID, "join").is_displayed(), "the join form after Leave and a reload")
    assert not b.driver.find_element(By.ID, "room").is_displayed()
    a.shot("after-leave")
