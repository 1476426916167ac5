"""The PCM helpers every stage shares: trimming a clip's quiet ends."""

import numpy as np

from omnicli.audio.pcm import trim_quiet_ends

RATE = 1000


def test_quiet_ends_are_cut_to_the_margins_asked_for():
    sound = np.concatenate([np.zeros(300), np.full(500, 0.5), np.full(10, 0.001), np.zeros(400)]).astype(np.float32)
    trimmed = trim_quiet_ends(sound, RATE, before_s=0.04, after_s=0.2)
    assert len(trimmed) == 40 + 500 + 200
    assert trimmed[39] == 0 and trimmed[40] == 0.5 and trimmed[539] == 0.5
    kept = trim_quiet_ends(sound, RATE, before_s=1.0, after_s=1.0)  # margins longer than the quiet: nothing cut
    assert len(kept) == len(sound)
    faint = trim_quiet_ends(sound, RATE, before_s=0.0, after_s=0.0, relative=0.001)  # the faint tail counts as sound
    assert len(faint) == 510


def test_a_clip_without_sound_is_returned_whole():
    assert len(trim_quiet_ends(np.zeros(100, np.float32), RATE, before_s=0.0, after_s=0.0)) == 100
    assert len(trim_quiet_ends(np.zeros(0, np.float32), RATE, before_s=0.0, after_s=0.0)) == 0
