"""vlfair demo Space: run a bias probe on an encoder in the browser.

Offline (no Hub), it offers the demo world: two tiny CLIP encoders trained on a synthetic world
with planted biases (shipped inside vlfair, loaded in a second), and that world's data.
With the Hub, a short list of real encoders and a balanced FairFace sample are added; other model
ids only when VLFAIR_SPACE_ALLOW_ANY_MODEL=1. Limits: VLFAIR_SPACE_MAX_FILES, VLFAIR_SPACE_MAX_FILE_MB,
VLFAIR_SPACE_MAX_TOTAL_MB, VLFAIR_SPACE_TIME_LIMIT_S, VLFAIR_SPACE_MAX_KEPT_MB (what it keeps on disk:
each page's last answer, never the uploads of an answered run; session.RequestStore).
"""

import html
import os

import gradio as gr
import pandas as pd
import tqdm

from vlfair.logging import get_logger
from vlfair.space import session
from vlfair.space.limits import Limits, LimitSettingError, SpaceInputError, run_with_time_limit
from vlfair.space.uploads import UPLOAD_HELP, UPLOADS, label_template, read_labels_csv

INTRO = """# vlfair: measure social bias in a vision-language model
Pick an encoder, a probe and data, then **run**. The *demo world* works offline: its encoders were
trained on a synthetic world with biases planted on purpose (doctors mostly men, "smart" mostly one
race, politicians mostly men, German captions rare; the generator makes "nurse" raise the share of
women by 0.4). The biased encoder should show them; the control encoder should not."""

log = get_logger("vlfair.spaces.demo")
# gr.Progress(track_tqdm=True) patches tqdm so that every bar reads its own `_progress`, which only bars
# made after the patch have: a bar made before it (a model loaded at start-up) would raise from its
# close when collected. A class default keeps those bars working.
tqdm.tqdm._progress = None
# Gradio's own clean-up (Blocks' delete_cache): every hour, the files it served or took in more than a day ago. What
# the Space keeps between requests is otherwise each page's last answer, within a cap (session.RequestStore).
DELETE_CACHE = (3600, 24 * 3600)
TRIM_EVERY_S = 60  # the cap on what is kept, also between requests (uploads come without one)
WAITING = "No run yet: choose an encoder, a probe and data, then **run**."
FAILED = "**The run stopped**: nothing was measured. The message at the top right says why."


def _labels(csv_file, table) -> pd.DataFrame | None:
    """A labels CSV wins over the table typed in the UI."""
    if csv_file:
        return read_labels_csv(csv_file)
    if isinstance(table, pd.DataFrame) and len(table) and table.astype(str).ne("").any().any():
        return table
    return None


def _tables_markdown(tables: dict[str, str]) -> str:
    return "\n".join(f"### {name.replace('_', ' ')}\n{markdown}" for name, markdown in tables.items())


def build_app(cache_dir="default", limits: Limits | None = None, allow_other: bool | None = None,
              hub: bool | None = None) -> gr.Blocks:
    limits = limits or Limits.from_env()
    allow_other = os.environ.get("VLFAIR_SPACE_ALLOW_ANY_MODEL") == "1" if allow_other is None else allow_other
    hub = session.hub_reachable() if hub is None else hub
    pool = session.EncoderPool(cache_dir)

    tracked = gr.Progress(track_tqdm=True)  # a marker: Gradio hands each call a fresh tracker in its place

    def run(probe, encoder, other, data, per_group, images, labels_csv, label_table, prompt, last_answer=None,
            progress=tracked):
        uploads = [*(images or []), *([labels_csv] if labels_csv else [])]
        folder = store.new_folder(spare=uploads)

        def work():
            return session.run_request(
                pool, probe, encoder, data, other_id=other or "", allow_other=allow_other, per_group=per_group,
                uploads=images, labels=_labels(labels_csv, label_table) if data == session.UPLOAD else None,
                prompt=prompt or "", limits=limits, out_dir=folder, progress=lambda f, text: progress(f, desc=text))

        try:
            output = run_with_time_limit(work, limits.time_limit_s)
        except BaseException as exc:
            store.forget(folder)  # a request that stopped shows nothing: its folder goes (past the time limit too)
            if not isinstance(exc, SpaceInputError):
                raise
            log.warning(f"demo Space: refused a run: {exc}")  # the person's mistake: one server line, no traceback
            # a toast renders HTML: the message (file names, labels, a Hub model's error) is text
            raise gr.Error(html.escape(str(exc), quote=False), duration=None, print_exception=False) from None
        finally:
            store.forget(last_answer)  # the click cleared it from the page; this answer replaces it
        # answered: the uploads were read (a refused request keeps them, for the visitor to correct the labels)
        store.forget_uploads(uploads)
        shown = other.strip() if other and other.strip() else encoder
        return (session.run_summary(output.results, shown), session.readable_metrics(output.metrics),
                [str(p) for p in output.plots], _tables_markdown(output.tables),
                [str(output.results_path), str(output.report_path)], str(folder))

    def on_probe(probe):
        choices = session.data_choices(probe, hub)
        return gr.update(choices=choices, value=choices[0]), gr.update(visible=probe in session.PROMPTED)

    def on_data(data):
        sampled = data not in (session.UPLOAD, session.WORLD_DATA, session.GENERATED)
        return gr.update(visible=data == session.UPLOAD), gr.update(visible=sampled)

    def on_images(images, probe):
        return label_template(images or [], probe) if probe in UPLOADS else pd.DataFrame()

    with gr.Blocks(title="vlfair demo", delete_cache=DELETE_CACHE) as app:
        store = session.RequestStore(app.GRADIO_CACHE, limits.max_kept_bytes)
        store.keep_trimmed(TRIM_EVERY_S)
        # the folder of the answer this page shows: removed at the page's next answer, or when its session ends
        last_answer = gr.State(None, delete_callback=store.forget)
        gr.Markdown(INTRO)
        with gr.Row():
            encoder = gr.Dropdown(session.encoder_choices(hub), value=session.WORLD_BIASED, label="encoder")
            other = gr.Textbox(label="or another Hub model id", placeholder="owner/name[@revision]",
                               visible=allow_other)
            probes = session.probe_choices(hub)  # the registry's, the first study first
            probe = gr.Dropdown(probes, value=probes[0], label="probe")
            data_options = session.data_choices(probes[0], hub)
            data = gr.Dropdown(data_options, value=data_options[0], label="data")
        per_group = gr.Slider(2, limits.max_sample_per_group, value=10, step=1, label="sample: images per group",
                              visible=False)
        prompt = gr.Textbox("a nurse at the hospital", label="prompt (word-influence)", visible=False)
        with gr.Group(visible=False) as upload_box:
            gr.Markdown(UPLOAD_HELP.format(max_files=limits.max_files, max_mb=limits.max_file_bytes / 2**20))
            # ".mpo": a camera's multi-picture JPEG, which no MIME table names an image (Gradio refuses it otherwise)
            images = gr.File(file_count="multiple", file_types=["image", ".mpo"], label="images", type="filepath",
                             elem_id="images")
            labels_csv = gr.File(file_types=[".csv"], label="labels CSV (optional)", type="filepath",
                                 elem_id="labels-csv")
            label_table = gr.Dataframe(label="labels, one row per image (or upload a CSV)", interactive=True,
                                       type="pandas")
        run_button = gr.Button("run", variant="primary")
        summary = gr.Markdown(WAITING, elem_id="summary")  # never empty: the run's one progress bar is drawn over it
        # hidden until a run has results: empty, they would show placeholder headers and drop zones
        metrics = gr.Dataframe(label="metrics", interactive=False, elem_id="metrics", wrap=True, visible=False)
        plots = gr.Gallery(label="plots", columns=2, height="auto", object_fit="contain", elem_id="plots",
                           visible=False)
        tables = gr.Markdown(elem_id="tables", visible=False)
        downloads = gr.File(label="results.json and report.html", file_count="multiple", interactive=False,
                            elem_id="downloads", visible=False)

        probe.change(on_probe, probe, [data, prompt], api_name=False)
        data.change(on_data, data, [upload_box, per_group], api_name=False)
        for trigger in (images, probe):  # the label columns depend on the probe
            trigger.change(on_images, [images, probe], label_table, api_name=False)
        results = [summary, metrics, plots, tables, downloads]
        # a new run first clears the last one's results: after an error nothing stale stays on the page
        # (hidden outputs also draw no progress of their own: the run's one bar stays over the summary)
        cleared = ("Running…", *[gr.update(value=None, visible=False)] * 2, gr.update(value="", visible=False),
                   gr.update(value=None, visible=False))
        running = run_button.click(lambda: cleared, None, results, queue=False, show_progress="hidden",
                                   api_name=False).then(
            run, [probe, encoder, other, data, per_group, images, labels_csv, label_table, prompt, last_answer],
            [*results, last_answer], api_name="run", show_progress_on=summary)  # one progress bar, over the summary
        # the API's values stay plain; the page shows the results once there are some (and no longer the uploads,
        # which are gone once answered), or says it stopped
        running.success(lambda: [gr.update(visible=True)] * 4 + [None, None], None,
                        [metrics, plots, tables, downloads, images, labels_csv], queue=False, show_progress="hidden",
                        api_name=False)
        running.failure(lambda: FAILED, None, summary, queue=False, show_progress="hidden", api_name=False)
    app.queue(default_concurrency_limit=1)  # one probe at a time: a CPU Space has no room for two
    return app


if __name__ == "__main__":
    try:
        limits = Limits.from_env()
    except LimitSettingError as exc:  # the Space's own settings: said at start-up, not at the first request
        raise SystemExit(f"vlfair demo Space: {exc}") from None
    build_app(limits=limits).launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                                    max_file_size=limits.max_file_bytes)
