"""The zoo's architectures (models/zoo/make_zoo.py): tiny configurations of torchvision and Hugging
Face transformers models, a U-Net-like model and an LSTM language model.

SPECS maps a name to {"build": fn} (and "eval_export": True for an eval-mode export, "ref": the
reference's dtype when not float64); fn returns
(module, inputs, labels, mp_inputs, mp_labels): the module returns the logits, `inputs` maps ONNX
input names to a batch (2 samples; 4 images), mp_inputs to 4 such batches.
"""
import torch
import torchvision
from torch import nn
from torchvision.models import efficientnet, mobilenetv3, regnet, convnext

B, MP = 2, 8
CLASSES, VOCAB, SEQ = 10, 64, 8


def no_dropout(model):
    for name, child in model.named_children():
        if isinstance(child, nn.Dropout):
            setattr(model, name, nn.Identity())
        else:
            no_dropout(child)
    return model


def gen(seed=7):
    return torch.Generator().manual_seed(seed)


def image_data(size=32, channels=3):
    # 4 images (16 for mixed precision): a training-mode BatchNorm over 2 samples at 1x1 spatial
    # size normalises 2 numbers to +-1, which makes float32 training ill-conditioned
    g = gen()
    x = torch.randn(2 * B, channels, size, size, generator=g)
    y = torch.randint(0, CLASSES, (2 * B,), generator=g)
    mx = torch.randn(2 * MP, channels, size, size, generator=g)
    my = torch.randint(0, CLASSES, (2 * MP,), generator=g)
    return {"x": x}, y, {"x": mx}, my


def token_data(names=("input_ids",), vocab=VOCAB, seq=SEQ, low=0):
    g = gen()
    x = {n: torch.randint(low, vocab, (B, seq), generator=g) for n in names}
    y = torch.randint(0, vocab, (B, seq), generator=g)
    mx = {n: torch.randint(low, vocab, (MP, seq), generator=g) for n in names}
    my = torch.randint(0, vocab, (MP, seq), generator=g)
    return x, y, mx, my


def vision(make, size=32):
    def build():
        return (no_dropout(make()),) + image_data(size)
    return build


# ---- torchvision ----------------------------------------------------------------------------------

def mobilenet_v2():
    setting = [[1, 8, 1, 1], [6, 12, 2, 2], [6, 16, 1, 2]]
    m = torchvision.models.MobileNetV2(num_classes=CLASSES, width_mult=1.0, inverted_residual_setting=setting)
    m.features[-1] = torchvision.ops.Conv2dNormActivation(16, 32, kernel_size=1, activation_layer=nn.ReLU6)
    m.last_channel = 32
    m.classifier = nn.Sequential(nn.Identity(), nn.Linear(32, CLASSES))
    return m


def mobilenet_v3():
    cfg = mobilenetv3.InvertedResidualConfig
    setting = [cfg(8, 3, 8, 8, True, "RE", 2, 1, 1.0), cfg(8, 3, 24, 12, False, "RE", 2, 1, 1.0),
               cfg(12, 5, 32, 16, True, "HS", 2, 1, 1.0)]
    return mobilenetv3.MobileNetV3(setting, last_channel=32, num_classes=CLASSES, dropout=0.0)


def efficientnet_small():
    cfg = efficientnet.MBConvConfig
    setting = [cfg(1, 3, 1, 8, 8, 1, 1.0, 1.0), cfg(4, 3, 2, 8, 12, 2, 1.0, 1.0), cfg(4, 5, 2, 12, 16, 1, 1.0, 1.0)]
    return efficientnet.EfficientNet(setting, dropout=0.0, stochastic_depth_prob=0.0, num_classes=CLASSES,
                                     last_channel=32)


def regnet_small():
    params = regnet.BlockParams.from_init_params(depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=8)
    return regnet.RegNet(params, num_classes=CLASSES, stem_width=8)


def convnext_small():
    setting = [convnext.CNBlockConfig(8, 16, 1), convnext.CNBlockConfig(16, None, 1)]
    return convnext.ConvNeXt(setting, stochastic_depth_prob=0.0, num_classes=CLASSES)


def densenet_small():
    # densenet121's block structure (6, 12, 24, 16), with growth 4 instead of 32
    return torchvision.models.DenseNet(growth_rate=4, block_config=(6, 12, 24, 16), num_init_features=8, bn_size=2,
                                       num_classes=CLASSES)


def shufflenet_small():
    return torchvision.models.ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 64], num_classes=CLASSES)


def squeezenet_small():
    from torchvision.models.squeezenet import Fire
    m = torchvision.models.SqueezeNet(version="1_1", num_classes=CLASSES)
    m.features = nn.Sequential(
        nn.Conv2d(3, 16, kernel_size=3, stride=2), nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
        Fire(16, 4, 8, 8), Fire(16, 4, 8, 8),
        nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
        Fire(16, 8, 16, 16))
    m.classifier = nn.Sequential(nn.Identity(), nn.Conv2d(32, CLASSES, kernel_size=1), nn.ReLU(inplace=True),
                                 nn.AdaptiveAvgPool2d((1, 1)))
    return m


def vit_small():
    return torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                                                mlp_dim=64, num_classes=CLASSES)


# ---- custom ---------------------------------------------------------------------------------------

class UNet(nn.Module):
    """Two levels: conv blocks, max-pool down, ConvTranspose and bilinear Resize up, skip concats.
    Logits are channel-last [N, H, W, classes] so that cross-entropy runs over the last axis."""

    def __init__(self, c=8, classes=4):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

        self.enc1, self.enc2, self.mid = block(3, c), block(c, 2 * c), block(2 * c, 2 * c)
        self.up2 = nn.ConvTranspose2d(2 * c, 2 * c, 2, stride=2)
        self.dec2 = block(4 * c, c)
        self.dec1 = block(2 * c, c)
        self.head = nn.Conv2d(c, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(nn.functional.max_pool2d(e1, 2))
        m = self.mid(nn.functional.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        up = nn.functional.interpolate(d2, scale_factor=2.0, mode="bilinear", align_corners=False)
        d1 = self.dec1(torch.cat([up, e1], 1))
        return self.head(d1).permute(0, 2, 3, 1)


def unet():
    x, _, mx, _ = image_data(size=16)
    g = gen(8)
    return UNet(), x, torch.randint(0, 4, (2 * B, 16, 16), generator=g), mx, \
        torch.randint(0, 4, (2 * MP, 16, 16), generator=g)


class LstmLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 16)
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, VOCAB)

    def forward(self, tokens):
        h, _ = self.lstm(self.emb(tokens))
        return self.head(h)


def lstm_lm():
    return (LstmLM(),) + token_data(("tokens",))


# ---- transformers ---------------------------------------------------------------------------------

class Logits(nn.Module):
    """A Hugging Face model called with keyword inputs, returning its logits only."""

    def __init__(self, model, keys):
        super().__init__()
        self.m, self.keys = model, keys

    def forward(self, *args):
        return self.m(**dict(zip(self.keys, args)), return_dict=True).logits


def hf(config_cls, model_cls, names=("input_ids",), low=0, **cfg):
    def build():
        import transformers
        config = getattr(transformers, config_cls)(**cfg)
        config._attn_implementation = "eager"
        model = getattr(transformers, model_cls)(config)
        data = token_data(names, low=low)
        return (Logits(model, list(names)),) + data
    return build


NO_DROP = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
BERTISH = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
               max_position_embeddings=32, **NO_DROP)


def t5():
    import transformers
    cfg = transformers.T5Config(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2,
                                num_heads=2, relative_attention_num_buckets=8, dropout_rate=0.0,
                                decoder_start_token_id=0, pad_token_id=0)
    model = transformers.T5ForConditionalGeneration(cfg)
    return (Logits(model, ["input_ids", "decoder_input_ids"]),) + token_data(("input_ids", "decoder_input_ids"))


class DefaultDtypeLogits(Logits):
    """Logits, run with torch's default dtype set to the parameters' dtype. BART's causal mask is
    torch.full(..., torch.finfo(dtype).min) without a dtype: in the float64 reference run that puts
    float64's minimum into a float32 tensor, which torch refuses (an overflow). Float32 runs and the
    export are unchanged (the default is float32 there)."""

    def forward(self, *args):
        old = torch.get_default_dtype()
        torch.set_default_dtype(next(self.parameters()).dtype)
        try:
            return super().forward(*args)
        finally:
            torch.set_default_dtype(old)


def bart():
    import transformers
    cfg = transformers.BartConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
                                  encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                  decoder_ffn_dim=64, max_position_embeddings=32, dropout=0.0, attention_dropout=0.0,
                                  activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0,
                                  pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
                                  forced_eos_token_id=None, use_cache=False)
    cfg._attn_implementation = "eager"
    model = transformers.BartForConditionalGeneration(cfg)
    # token ids from 3: no pad (1) or special token in the batch
    return (DefaultDtypeLogits(model, ["input_ids", "decoder_input_ids"]),) + \
        token_data(("input_ids", "decoder_input_ids"), low=3)


def whisper():
    import transformers
    cfg = transformers.WhisperConfig(vocab_size=VOCAB, num_mel_bins=8, encoder_layers=1, decoder_layers=1,
                                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                     decoder_ffn_dim=64, d_model=32, max_source_positions=16,
                                     max_target_positions=16, dropout=0.0, attention_dropout=0.0,
                                     activation_dropout=0.0, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                     decoder_start_token_id=1, begin_suppress_tokens=None, suppress_tokens=None)
    cfg._attn_implementation = "eager"
    model = transformers.WhisperForConditionalGeneration(cfg)
    g = gen()
    feats = torch.randn(B, 8, 32, generator=g)
    x, y, mx, my = token_data(("decoder_input_ids",))
    return (Logits(model, ["input_features", "decoder_input_ids"]), {"input_features": feats, **x}, y,
            {"input_features": torch.randn(MP, 8, 32, generator=g), **mx}, my)


def wav2vec2():
    import transformers
    from transformers.models.wav2vec2 import modeling_wav2vec2
    # Its encoder asks whether it runs under FSDP, which imports torch.distributed.fsdp: that import
    # fails on Debian's torch 1.13 with Python 3.11 (a dataclass with a mutable default). No FSDP here.
    modeling_wav2vec2.is_fsdp_managed_module = lambda module: False
    cfg = transformers.Wav2Vec2Config(vocab_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3),
                                      num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2,
                                      feat_extract_norm="group", do_stable_layer_norm=False, mask_time_prob=0.0,
                                      hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                                      feat_proj_dropout=0.0, final_dropout=0.0, layerdrop=0.0)
    cfg._attn_implementation = "eager"
    model = transformers.Wav2Vec2ForCTC(cfg)
    g = gen()
    frames = 15  # 160 samples -> (160 - 10) / 5 + 1 = 31 -> (31 - 3) / 2 + 1 = 15
    return (Logits(model, ["input_values"]), {"input_values": torch.randn(B, 160, generator=g)},
            torch.randint(0, 16, (B, frames), generator=g), {"input_values": torch.randn(MP, 160, generator=g)},
            torch.randint(0, 16, (MP, frames), generator=g))


SPECS = {
    "mobilenet_v2": {"build": vision(mobilenet_v2)},
    "mobilenet_v3": {"build": vision(mobilenet_v3)},
    "efficientnet": {"build": vision(efficientnet_small)},
    "regnet": {"build": vision(regnet_small)},
    "convnext": {"build": vision(convnext_small)},
    "shufflenet_v2": {"build": vision(shufflenet_small)},
    "squeezenet": {"build": vision(squeezenet_small)},
    "vit": {"build": vision(vit_small)},
    "unet": {"build": unet},
    "lstm_lm": {"build": lstm_lm},
    "bert": {"build": hf("BertConfig", "BertForMaskedLM", **BERTISH)},
    "distilbert": {"build": hf("DistilBertConfig", "DistilBertForMaskedLM", vocab_size=VOCAB, dim=32, n_layers=2,
                               n_heads=2, hidden_dim=64, max_position_embeddings=32, dropout=0.0,
                               attention_dropout=0.0)},
    "roberta": {"build": hf("RobertaConfig", "RobertaForMaskedLM", low=2, pad_token_id=1, **BERTISH)},
    "gpt2": {"build": hf("GPT2Config", "GPT2LMHeadModel", vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2,
                         n_positions=16, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)},
    "llama": {"build": hf("LlamaConfig", "LlamaForCausalLM", vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=32, use_cache=False)},
    "t5": {"build": t5},
    "bart": {"build": bart},
    # PyTorch 1.13's float32 run gets the encoder Conv1d gradients about twice the float64 ones (not
    # rounding; otter's float32 agrees with float64): tests/zoo/zoo_test.cc then holds the model to
    # the plain tolerances (it relaxes them only where PyTorch's float32 run is merely imprecise).
    "whisper": {"build": whisper},
    "wav2vec2": {"build": wav2vec2},
    # 64x64 images: at 32x32 the last BatchNorm normalises 4 numbers (1x1, 4 samples) per channel
    "densenet121s": {"build": vision(densenet_small, 64)},
    "densenet121s_eval": {"build": vision(densenet_small, 64), "eval_export": True},
}
