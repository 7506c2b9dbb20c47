"""The Gradio page of `zoo explore` (the `web` extra): the layout and the event handlers.

What the page shows is computed by `zoo.explore.translation`, `zoo.explore.images` and
`zoo.explore.drawing`; here a bad input becomes a message on the page (`#message`), never a
traceback, and the page keeps answering. Safe by default: it binds 127.0.0.1, Gradio's
analytics are off, the theme uses the system's fonts (no CDN), no share link.
"""

import os
import tempfile

import gradio as gr

from zoo.errors import ZooError
from zoo.explore import drawing, images, targets, translation

THEME_FONTS = dict(font=["ui-sans-serif", "system-ui", "sans-serif"],
                   font_mono=["ui-monospace", "monospace"])
NO_ATTENTION = ("This is an export: a SavedModel keeps no attention outputs, so the page shows "
                "its answers only. `zoo explore RUN_DIR` on the run it came from shows the "
                "attention too.")


def _message(error):
    """The line shown in `#message` for a bad input or a failure."""
    if isinstance(error, ZooError):
        return f"**Error:** {' '.join(str(error).split())}"
    return (f"**Error:** {type(error).__name__}: {' '.join(str(error).split())[:300]} "
            "(a bug of the zoo; the page keeps working)")


# === Translation ===


def _translate(target, sentence, decoding, beam_size, temperature, top_k, top_p, seed):
    """The handler of *Translate*: (message, translation, result, map, head, heat map, copy
    probabilities)."""
    try:
        result = translation.translate(target, sentence, decoding, beam_size,
                                       temperature=temperature, top_k=top_k or 0,
                                       top_p=top_p, seed=seed or 0)
    except Exception as error:  # noqa: BLE001 - any failure is a message on the page
        return _message(error), "", None, gr.update(), gr.update(), "", None  # no stale answer
    note = "" if result.seed is None else f"Sampled with seed {result.seed}."
    if not result.maps:
        return note, result.text, result, gr.update(), gr.update(), gr.update(), None
    names = list(result.maps)
    name = _default_map(names)
    heads = drawing.head_choices(result, name)
    copied = None if result.copy is None else [
        (f"{token} {p:.2f}", p) for token, p in zip(result.target_tokens, result.copy)]
    return (note, result.text, result, gr.update(choices=names, value=name),
            gr.update(choices=heads, value=drawing.MEAN),
            drawing.heatmap(result, name, drawing.MEAN), copied)


def _is_copying(target):
    """Whether the run's model copies (a pointer-generator): its copy probabilities shown."""
    names = [] if target.run is None else [layer.name for layer in target.run.model.layers]
    return "pointer_generator" in names


def _default_map(names):
    """The last layer's cross-attention (or alignment), else the first map."""
    crossing = [n for n in names if n.endswith(("cross_attention", "alignment", "/attention"))]
    return (crossing or names)[-1]


def _redraw(result, name, head):
    """The handler of the map and head selectors: (message, head choices, heat map)."""
    if result is None or name not in result.maps:
        return "", gr.update(), gr.update()
    heads = drawing.head_choices(result, name)
    head = head if head in heads else drawing.MEAN
    try:
        picture = drawing.heatmap(result, name, head)
    except Exception as error:  # noqa: BLE001 - a message on the page
        return _message(error), gr.update(), gr.update()
    return "", gr.update(choices=heads, value=head), picture


def _translation_tab(target, message):
    """The *Translate* tab: the sentence, the decoding, the translation and the heat map."""
    with gr.Row():
        source = gr.Textbox(label="Source sentence", lines=2, elem_id="source", scale=3)
        with gr.Column(scale=2):
            decoding = gr.Radio(list(translation.DECODINGS), value="greedy", label="Decoding",
                                elem_id="decoding")
            beam_size = gr.Slider(1, 16, value=4, step=1, label="Beam width (beam)")
    with gr.Accordion("Sampling settings (zoo predict --sample)", open=False):
        with gr.Row():
            temperature = gr.Number(1.0, label="Temperature")
            top_k = gr.Number(0, precision=0, label="Top-k (0: off)")
            top_p = gr.Number(1.0, label="Top-p (1: off)")
            seed = gr.Number(0, precision=0, label="Seed")
    button = gr.Button("Translate", variant="primary", elem_id="translate")
    if target.examples:
        gr.Examples([[s] for s in target.examples], inputs=[source], label="Test sentences")
    output = gr.Textbox(label="Translation", interactive=False, elem_id="translation")
    copying = gr.HighlightedText(label="Copy probability 1 − p_gen of each target token",
                                 elem_id="copy", visible=_is_copying(target))
    result = gr.State()
    with gr.Row(visible=target.run is not None):
        map_name = gr.Dropdown([], label="Attention map (layer)", elem_id="map")
        head = gr.Dropdown([drawing.MEAN], value=drawing.MEAN, label="Head", elem_id="head")
    heatmap = gr.HTML(elem_id="heatmap")
    if target.run is None:
        gr.Markdown(NO_ATTENTION, elem_id="no-attention")

    def answer(*values):
        return _translate(target, *values)

    inputs = [source, decoding, beam_size, temperature, top_k, top_p, seed]
    outputs = [message, output, result, map_name, head, heatmap, copying]
    button.click(answer, inputs, outputs, api_name="translate")  # benchmarks/explore_answer.py
    source.submit(answer, inputs, outputs, api_name=False)
    redraw = dict(inputs=[result, map_name, head], outputs=[message, head, heatmap])
    map_name.input(_redraw, **redraw)
    head.input(_redraw, **redraw)


# === Images ===


def _classify(target, path):
    """The handler of an upload or a picked test image:
    (message, classes, result, rollout, layer, heads)."""
    try:
        result = images.classify(target, path)
        rollout = images.rollout_figure(target, result) if result.maps else None
        heads = images.heads_figure(result, 0) if result.maps else None
    except Exception as error:  # noqa: BLE001 - any failure is a message on the page
        return (_message(error),) + (gr.update(),) * 5
    classes = {name: float(probability) for name, probability in result.classes}
    layers = [f"layer {i}" for i in range(result.layers)]
    layer = gr.update(choices=layers, value=layers[0]) if layers else gr.update()
    return "", classes, result, rollout, layer, heads


def _layer_heads(result, layer):
    """The handler of the layer selector: (message, the heads' picture)."""
    if result is None or not result.maps or not layer:
        return "", gr.update()
    try:
        return "", images.heads_figure(result, int(layer.split()[-1]))
    except Exception as error:  # noqa: BLE001 - a message on the page
        return _message(error), gr.update()


def _heads_label(target):
    """What the heads' picture shows: the class token's attention, or the pooled tokens'."""
    pooling = target.run.config["model_config"].get("pooling") if target.run else None
    if pooling in (None, "cls"):
        return "**Each head's attention** from the class token"
    return f"**Each head's attention**, its rows weighted as the {pooling!r} pooling weighs them"


def _image_tab(target, message):
    """The *Classify* tab: an upload or a test image; classes, rollout, heads."""
    with gr.Row():
        with gr.Column():
            upload = gr.File(label="Upload an image", type="filepath", elem_id="upload")
            gallery = gr.Gallery(target.examples, label="or pick a test image", columns=8,
                                 height=160, allow_preview=False, elem_id="test-images",
                                 buttons=[], interactive=False, visible=bool(target.examples))
        classes = gr.Label(num_top_classes=images.TOP_CLASSES, label="Top classes",
                           elem_id="classes")
    result = gr.State()
    with gr.Row(visible=target.run is not None):
        with gr.Column():  # the plots' own labels would cover their titles: a line above
            gr.Markdown("**Attention rollout** (Abnar & Zuidema 2020)")
            rollout = gr.Plot(show_label=False, elem_id="rollout")
        with gr.Column():
            layer = gr.Dropdown([], label="Layer", elem_id="layer")
            gr.Markdown(_heads_label(target))
            heads = gr.Plot(show_label=False, elem_id="heads")
    if target.run is None:
        gr.Markdown(NO_ATTENTION, elem_id="no-attention")
    outputs = [message, classes, result, rollout, layer, heads]

    def uploaded(path):  # the upload box emptied again, ready for the next file
        return _classify(target, path) + (None,)

    upload.upload(uploaded, [upload], outputs + [upload])

    def picked(event: gr.SelectData):
        return _classify(target, target.examples[event.index])

    gallery.select(picked, None, outputs)
    layer.input(_layer_heads, [result, layer], [message, heads])


# === The page ===


def _run_tab(target):
    """The *Run* tab: training curves and the run's config, summary and metrics."""
    figure = drawing.curves(target.path)
    if figure is not None:
        gr.Markdown("**Training curves** (history.csv)")
        gr.Plot(figure, show_label=False, elem_id="curves")
    gr.JSON(drawing.run_files(target.path), label="config.json, summary.json, metrics.json",
            elem_id="config")


def build(target):
    """The `gr.Blocks` page of an opened `zoo.explore.targets.Target`."""
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"  # read by Gradio when it would call home
    kind = ("a translation" if target.kind == "translation" else "an image classification") + (
        " export (SavedModel)" if target.run is None else " run")
    with gr.Blocks(title=f"zoo explore: {target.name}", analytics_enabled=False) as page:
        gr.Markdown(f"## zoo explore: {target.name}\n`{target.path}`: {kind}")
        message = gr.Markdown(elem_id="message")
        with gr.Tab("Translate" if target.kind == "translation" else "Classify"):
            if target.kind == "translation":
                _translation_tab(target, message)
            else:
                _image_tab(target, message)
        if target.run is not None:
            with gr.Tab("Run"):
                _run_tab(target)
    return page


def serve(path, host="127.0.0.1", port=7860):
    """Open PATH, warm its model up and serve the page at http://HOST:PORT until Ctrl+C."""
    with tempfile.TemporaryDirectory(prefix="zoo-explore-") as workdir:
        target = targets.open_target(path, workdir)
        if target.kind == "translation" and target.run is not None and target.examples:
            translation.translate(target, target.examples[0])  # traces the decoding once
        page = build(target)
        print(f"zoo explore: {target.name} at http://{host}:{port} (Ctrl+C to stop)",
              flush=True)
        try:
            page.launch(server_name=host, server_port=port, share=False, ssr_mode=False,
                        quiet=True, show_error=False, theme=gr.themes.Default(**THEME_FONTS),
                        allowed_paths=[workdir], footer_links=["settings"], mcp_server=False,
                        pwa=False, enable_monitoring=False)
        except OSError as error:
            raise ZooError(f"cannot serve at {host}:{port}: {' '.join(str(error).split())}") from None
